package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/install"
	"github.com/capo-net/capo/pkg/wire"
	"github.com/capo-net/capo/test/testbed"
)

func installed(t *testing.T, n *testbed.NodeCNI) bool {
	t.Helper()
	data, err := os.ReadFile(n.ConfFile)
	if err != nil {
		t.Fatal(err)
	}
	st, err := install.Inspect(data)
	if err != nil {
		t.Fatal(err)
	}
	_, binErr := os.Stat(filepath.Join(n.BinDir, "capo-ipam"))
	_, helperErr := os.Stat(filepath.Join(n.BinDir, wire.KubeHelper))
	return st.Installed && binErr == nil && helperErr == nil
}

func TestNodeOptInDrivesInstallation(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{NoAgent: true})
		env.EnableNamespace()
		n := env.SetupNodeCNI()
		set, podName := env.AgentDaemonSet()
		a := env.StartAgentWith(testbed.AgentOptions{ManageCNI: n, PodName: podName})

		// Not opted in: Calico's chain stays as calico-node wrote it.
		time.Sleep(time.Second)
		if got, _ := os.ReadFile(n.ConfFile); string(got) != string(n.Original) {
			t.Fatal("the conflist changed on a node that is not opted in")
		}

		env.OptInNode()
		a.WaitMetric(1, "capo_agent_cni_installed")
		if !installed(t, n) {
			t.Fatal("opted in, but capo-ipam is not in the chain")
		}
		// The runtime's view: a selected pod through the files on disk.
		sb := env.NewDiskSandbox(env.CreatePod("db-0", testbed.StatefulPod("db")), n)
		if err := sb.Add(ctx); err != nil {
			t.Fatalf("ADD through the installed chain: %v", err)
		}
		if err := sb.Del(ctx); err != nil {
			t.Fatal(err)
		}
		if !held(env, sb.IP()) {
			t.Fatal("the installed chain did not reserve")
		}

		// A running pod whose sandbox the runtime will tear down in the
		// rewrite window below.
		inWindow := env.NewDiskSandbox(env.CreatePod("db-1", testbed.StatefulPod("db")), n)
		if err := inWindow.Add(ctx); err != nil {
			t.Fatal(err)
		}

		// calico-node restarts and rewrites its conflist and binaries.
		rewrote := time.Now()
		n.CalicoNodeRewrites(env)
		eventually(t, 5*time.Second, "capo's edit re-applied", func() bool { return installed(t, n) })
		took := time.Since(rewrote)
		t.Logf("re-applied %s after calico-node's rewrite", took.Round(time.Millisecond))
		if took > 2*time.Second {
			t.Fatalf("re-applied after %s; the watch should catch a rewrite within a second", took)
		}
		a.WaitMetricAtLeast(1, "capo_agent_cni_reapplied_total", `what="config"`)
		// The runtime read the conflist in that window: the DEL went around
		// capo-ipam. The sweep after the re-apply finds it and reserves.
		if err := inWindow.DelWith(ctx, n.Original); err != nil {
			t.Fatal(err)
		}
		if env.Allocated(inWindow.IPs[0]) || held(env, inWindow.IP()) {
			t.Fatal("calico-ipam's own DEL did not simply release")
		}
		eventually(t, 15*time.Second, "the window's teardown reserved after the fact", func() bool { return held(env, inWindow.IP()) })
		a.WaitMetric(1, "capo_agent_bypassed_teardowns_total")

		// Opt-out: the chain is Calico's own again, byte for byte.
		env.OptOutNode()
		a.WaitMetric(0, "capo_agent_cni_installed")
		if got, _ := os.ReadFile(n.ConfFile); string(got) != string(n.Original) {
			t.Fatalf("opt-out did not restore calico-node's conflist:\n%s", got)
		}
		for _, name := range []string{"capo-ipam", wire.KubeHelper} {
			if _, err := os.Stat(filepath.Join(n.BinDir, name)); err == nil {
				t.Fatalf("opt-out left %s in the bin dir", name)
			}
		}

		// A rolling update stops the agent: the node stays as it is.
		env.OptInNode()
		a.WaitMetric(1, "capo_agent_cni_installed")
		a.Stop()
		if !installed(t, n) {
			t.Fatal("stopping the agent while its DaemonSet exists removed capo")
		}
		// Deleting the DaemonSet for good: the last agent restores Calico's chain.
		a = env.StartAgentWith(testbed.AgentOptions{ManageCNI: n, PodName: podName})
		a.WaitMetric(1, "capo_agent_cni_installed")
		if err := env.Kube.AppsV1().DaemonSets(env.Namespace).Delete(ctx, set.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		a.Stop()
		if got, _ := os.ReadFile(n.ConfFile); string(got) != string(n.Original) || strings.Contains(string(got), "capo-ipam") {
			t.Fatalf("after the DaemonSet was deleted the conflist is:\n%s", got)
		}
	})
}

// An agent that starts on an opted-in node whose conflist calico-node has
// rewritten (it was away during calico-node's rollout: a crash, a node
// reboot) is not ready until capo is back in the chain: while a
// teardown may still read Calico's own conflist, capo-controller must go
// on covering the node, which it does only while the agent is not ready.
func TestAgentNotReadyUntilCapoIsBackInTheChain(t *testing.T) {
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{NoAgent: true})
	env.EnableNamespace()
	n := env.SetupNodeCNI() // Calico's own conflist, as install-cni leaves it
	_, podName := env.AgentDaemonSet()
	env.OptInNode()
	a := env.StartAgentWith(testbed.AgentOptions{ManageCNI: n, PodName: podName, NotReady: true})
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatal("the agent never became ready")
		}
		resp, err := client.Get("http://" + a.HealthAddr + "/readyz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
	}
	if !installed(t, n) {
		t.Fatal("the agent said ready while capo-ipam was not yet back in the node's conflist")
	}
}

// A node's agent that starts while the API server cannot be reached, after
// calico-node rewrote the chain (a node's reboot in an outage; a rollout
// while the agent crash-loops), puts capo back first thing, from what it
// last knew of the node's opt-in: a teardown then reads capo-ipam, which
// journals it and keeps the member's address, instead of plain
// calico-ipam freeing it for as long as the outage lasts.
func TestAgentRestoresTheChainBeforeTheAPIServer(t *testing.T) {
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{NoAgent: true})
	env.EnableNamespace()
	n := env.SetupNodeCNI()
	_, podName := env.AgentDaemonSet()
	env.OptInNode()
	a := env.StartAgentWith(testbed.AgentOptions{ManageCNI: n, PodName: podName})
	a.WaitMetric(1, "capo_agent_cni_installed")
	member := env.NewDiskSandbox(env.CreatePod("db-0", testbed.StatefulPod("db")), n)
	if err := member.Add(ctx); err != nil {
		t.Fatal(err)
	}
	a.Stop()
	n.CalicoNodeRewrites(env)

	kc := filepath.Join(env.Dir, "unreachable.kubeconfig")
	if err := bed.WriteKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kc, []byte(strings.ReplaceAll(string(data), bed.APIServerURL, "https://127.0.0.1:1")), 0o600); err != nil {
		t.Fatal(err)
	}
	env.StartAgentWith(testbed.AgentOptions{ManageCNI: n, PodName: podName, Kubeconfig: kc, NoWait: true})
	eventually(t, 10*time.Second, "capo-ipam back in the chain with the API server out of reach", func() bool { return installed(t, n) })

	if err := member.DelWith(ctx, mustRead(t, n.ConfFile)); err != nil {
		t.Fatalf("DEL through the restored chain, its agent away: %v", err)
	}
	if !env.Allocated(net.ParseIP(member.IP())) {
		t.Fatalf("%s freed: the teardown went around capo-ipam", member.IP())
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
