package nodebed

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// controllers are what a one-node cluster needs from the controller-manager:
// node-lifecycle lifts the kubelet's not-ready taint (without it no
// DaemonSet or StatefulSet pod is ever scheduled), the workload
// controllers, the namespace controller for test cleanup, the service
// account and root CA publishers for pods' API credentials. The taint
// eviction deletes pods from a node tainted unreachable or out-of-service
// (a separate controller since 1.29; node-lifecycle only taints): pods
// tolerate the first for 300 s unless they say otherwise.
var controllers = []string{
	"node-lifecycle-controller", "taint-eviction-controller", "daemonset-controller", "statefulset-controller",
	"replicaset-controller", "deployment-controller", "garbage-collector-controller",
	"serviceaccount-controller", "root-ca-certificate-publisher-controller",
	"namespace-controller", "pod-garbage-collector-controller", "disruption-controller",
	"endpointslice-controller",
}

// startControllerManager runs kube-controller-manager with the bed's admin
// credentials; no leader election (one replica) and no serving port.
func (b *Bed) startControllerManager() error {
	p, err := b.Spawn("kube-controller-manager", b.logPath("kube-controller-manager"), b.Node.ControllerManager,
		"--kubeconfig="+b.kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--controllers="+strings.Join(controllers, ","),
		"--root-ca-file="+b.CAFile(), "--service-account-private-key-file="+b.ServiceAccountKeyFile(),
		"--use-service-account-credentials=false", "--kube-api-qps=100", "--kube-api-burst=200",
		"--concurrent-statefulset-syncs=5",
		// A dead node NotReady in about 20 s (kubelet.go: its lease renewed
		// every 5 s), not in Kubernetes' default 40 s and more.
		"--node-monitor-period=2s", "--node-monitor-grace-period=20s", "--v=1")
	if err != nil {
		return err
	}
	b.controllerManager = p
	return nil
}

// StopControllerManager stops it: no DaemonSet, StatefulSet or Deployment
// pod is re-created until StartControllerManager. A test uses this to hold
// a window open (say, between an agent pod's death and its replacement).
func (b *Bed) StopControllerManager() { b.controllerManager.Stop() }

// StartControllerManager starts it again; a no-op while it runs.
func (b *Bed) StartControllerManager() error {
	if b.controllerManager != nil && !b.controllerManager.Exited() {
		return nil
	}
	return b.startControllerManager()
}

func (b *Bed) startScheduler() error {
	p, err := b.Spawn("kube-scheduler", b.logPath("kube-scheduler"), b.Node.Scheduler,
		"--kubeconfig="+b.kubeconfig, "--leader-elect=false", "--secure-port=0", "--v=1")
	if err != nil {
		return err
	}
	b.scheduler = p
	return nil
}

// startProxy runs kube-proxy in iptables mode, so pods reach the API
// server's Service address as in any cluster. It leaves conntrack sysctls
// and localhost node ports alone: the host is shared.
func (b *Bed) startProxy() error {
	lo := net.IPv4(127, 0, 0, 1)
	healthz, err := freePort(lo)
	if err != nil {
		return err
	}
	metrics, err := freePort(lo)
	if err != nil {
		return err
	}
	p, err := b.Spawn("kube-proxy", b.logPath("kube-proxy"), b.Node.Proxy,
		"--kubeconfig="+b.kubeconfig, "--hostname-override="+b.NodeName, "--proxy-mode=iptables",
		"--cluster-cidr="+PodCIDR, "--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"--iptables-localhost-nodeports=false", "--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metrics),
		"--healthz-bind-address=127.0.0.1:"+strconv.Itoa(healthz), "--v=1")
	if err != nil {
		return err
	}
	b.proxy = p
	return nil
}

// waitServiceRouted waits until kube-proxy has programmed the API server's
// Service address, which in-cluster clients (capo's pods) dial.
func (b *Bed) waitServiceRouted(ctx context.Context) error {
	want := "-d " + testbed.KubernetesServiceIP.String() + "/32"
	return Poll(ctx, 60*time.Second, func() error {
		if b.proxy.Exited() {
			return fmt.Errorf("kube-proxy exited (log: %s)", b.logPath("kube-proxy"))
		}
		out, err := exec.Command("iptables-save", "-t", "nat").Output()
		if err != nil {
			return fmt.Errorf("iptables-save: %w", err)
		}
		if !strings.Contains(string(out), want) {
			return fmt.Errorf("kube-proxy has not programmed %s yet", testbed.KubernetesServiceIP)
		}
		return nil
	})
}

// cleanupProxy removes the iptables state the node's Kubernetes left:
// kube-proxy --cleanup for the Service rules, then whatever chain named
// KUBE- remains (the kubelet's KUBE-FIREWALL, the canaries), rule by rule,
// so nothing else in the shared tables is touched. --cleanup also tries
// the ipvs mode's ipsets and fails without the ipset tool; the check that
// no KUBE- chain is left is what counts.
func cleanupProxy(bin string) error {
	_ = exec.Command(bin, "--cleanup", "--v=0").Run()
	for _, tool := range []string{"iptables", "ip6tables"} {
		if err := removeKubeChains(tool); err != nil {
			return err
		}
	}
	return nil
}

func removeKubeChains(tool string) error {
	out, err := exec.Command(tool + "-save").Output()
	if err != nil {
		return fmt.Errorf("%s-save: %w", tool, err)
	}
	table := ""
	var jumps, chains [][]string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":KUBE-"):
			chains = append(chains, []string{table, f[0][1:]})
		case len(f) > 1 && f[0] == "-A" && !strings.HasPrefix(f[1], "KUBE-") && strings.Contains(line, "-j KUBE-"):
			jumps = append(jumps, append([]string{"-t", table, "-D"}, f[1:]...))
		}
	}
	for _, j := range jumps {
		if o, err := exec.Command(tool, j...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s %v: %w: %s", tool, j, err, o)
		}
	}
	for _, op := range []string{"-F", "-X"} {
		for _, c := range chains {
			if o, err := exec.Command(tool, "-t", c[0], op, c[1]).CombinedOutput(); err != nil {
				return fmt.Errorf("%s -t %s %s %s: %w: %s", tool, c[0], op, c[1], err, o)
			}
		}
	}
	return nil
}
