package e2e

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"

	"github.com/capo-net/capo/test/testbed"
)

// execIPAM runs an IPAM plugin of env's node directly, as the calico plugin
// or any other caller of an IPAM plugin does, with cniArgs as CNI_ARGS.
func execIPAM(t *testing.T, env *testbed.Env, plugin, command string, netconf []byte, containerID, cniArgs string) error {
	t.Helper()
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := (&invoke.RawExec{Stderr: &stderr}).ExecPlugin(ctx, filepath.Join(env.BinDir, plugin), netconf, []string{
		"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + containerID, "CNI_NETNS=/var/run/netns/" + containerID,
		"CNI_IFNAME=eth0", "CNI_ARGS=" + cniArgs, "CNI_PATH=" + env.BinDir,
	})
	if err != nil {
		t.Logf("%s %s with CNI_ARGS %q: %v\n%s", plugin, command, cniArgs, err, stderr.String())
	}
	return err
}

// Calico's own CNI suite calls IPAM with CNI_ARGS calico-ipam accepts and
// capo-ipam refused: an address asked for by IP= alone, a pod's args with
// no IgnoreUnknown; and with no pod at all, which the agent counted as a
// forgery and capo-ipam journaled. Through capo each DEL succeeds, frees at
// once what no pod holds, and reserves what a selected pod held.
func TestIPAMCallsWithCalicosCNIArgs(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		env := bed.NewEnv(t, ds, testbed.EnvOptions{OptIn: true})
		netconf := env.IPAMNetConf(testbed.Capo)
		explicit := net.IPv4(env.Pool.IP[0], env.Pool.IP[1], env.Pool.IP[2], env.Pool.IP[3]+5)

		t.Run("no pod, an explicit address", func(t *testing.T) {
			if err := execIPAM(t, env, "calico-ipam", "DEL", env.IPAMNetConf(testbed.PlainCalico), "ctl-explicit", "IP="+explicit.String()); err != nil {
				t.Fatalf("control: calico-ipam DEL of a handle that never existed, CNI_ARGS IP= alone: %v", err)
			}
			noPodAddAndDel(t, env, netconf, "explicit", "IP="+explicit.String())
		})
		t.Run("no pod", func(t *testing.T) {
			noPodAddAndDel(t, env, netconf, "nopod", "")
		})
		t.Run("a selected pod's DEL without IgnoreUnknown", func(t *testing.T) {
			sb := env.NewSandbox(env.CreatePod("redis-0", testbed.StatefulPod("redis")), env.Conflist(testbed.Capo))
			if err := sb.Add(context.Background()); err != nil {
				t.Fatal(err)
			}
			args := "K8S_POD_NAMESPACE=" + env.Namespace + ";K8S_POD_NAME=redis-0;K8S_POD_INFRA_CONTAINER_ID=" + sb.ContainerID + ";IP=" + sb.IP()
			if err := execIPAM(t, env, "calico-ipam", "DEL", env.IPAMNetConf(testbed.PlainCalico), "ctl-"+sb.ContainerID, args); err != nil {
				t.Fatalf("control: calico-ipam accepts these CNI_ARGS: %v", err)
			}
			if err := execIPAM(t, env, "capo-ipam", "DEL", netconf, sb.ContainerID, args); err != nil {
				t.Fatalf("DEL through capo-ipam: %v", err)
			}
			if _, ok := env.Reservations()[sb.IP()]; !ok || env.Allocated(sb.IPs[0]) {
				t.Fatalf("%s: reserved %v, still allocated %v; want reserved and released", sb.IP(), ok, env.Allocated(sb.IPs[0]))
			}
		})
		if n := env.Agent.Metric("capo_agent_socket_refused_total"); n != 0 {
			t.Fatalf("capo_agent_socket_refused_total = %v: capo-ipam's own DELs counted as forged", n)
		}
	})
}

// noPodAddAndDel ADDs and DELs a sandbox through capo-ipam with CNI_ARGS
// that name no pod: the address is Calico's until the DEL, which frees it
// at once, the agent having answered not-selected (nothing journaled).
func noPodAddAndDel(t *testing.T, env *testbed.Env, netconf []byte, containerID, args string) {
	t.Helper()
	if err := execIPAM(t, env, "capo-ipam", "ADD", netconf, containerID, args); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	st, err := env.IPAMState(context.Background())
	if err != nil || len(st.ByHandle[testbed.NetworkName+"."+containerID]) != 1 {
		t.Fatalf("after ADD, Calico holds %v (%v)", st, err)
	}
	ip := net.ParseIP(st.ByHandle[testbed.NetworkName+"."+containerID][0])
	before := env.Agent.Metric("capo_agent_del_decisions_total", `outcome="not-selected"`, `path="socket"`)
	if err := execIPAM(t, env, "capo-ipam", "DEL", netconf, containerID, args); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if env.Allocated(ip) {
		t.Fatalf("%s still allocated after the DEL", ip)
	}
	if got := env.Agent.Metric("capo_agent_del_decisions_total", `outcome="not-selected"`, `path="socket"`); got != before+1 {
		t.Fatalf("not-selected decisions on the socket %v -> %v: the agent did not answer the DEL as not selected", before, got)
	}
}
