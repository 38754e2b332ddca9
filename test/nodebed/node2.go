package nodebed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/testbed"
)

// The second node lives in a network namespace of its own, joined to the
// machine's by one veth pair; its containerd, kubelet, kube-proxy and
// felix share one mount namespace in which per-node directories are bound
// over the host paths the chart and Calico use.
const (
	Node2Name       = "capo-realnode-2"
	node2Netns      = "capo-n2"
	node2HostLink   = "capo-n2h" // the machine's end of the pair
	node2Dir        = Root + "/n2"
	node2State      = State + "/n2"
	node2CgroupRoot = "/capo-node2"
	node2Socket     = node2State + "/containerd/containerd.sock"
)

// The pair's addresses: the first node's felix uses its end as the VXLAN
// parent while the second node runs, so the tunnel runs over the pair.
var (
	node1LinkIP = net.IPv4(10, 252, 0, 1).To4()
	node2IP     = net.IPv4(10, 252, 0, 2).To4()
)

// Node2 is the running second node.
type Node2 struct {
	Name string
	IP   net.IP

	b                                         *Bed
	holder, containerd, kubelet, proxy, felix *testbed.Process
	dead                                      bool
}

// StartNode2 brings a second node up and joins it, for the test: it is
// torn down, and the first node's VXLAN parent put back, after t.
func (b *Bed) StartNode2(t testing.TB) *Node2 {
	t.Helper()
	n := &Node2{Name: Node2Name, IP: node2IP, b: b}
	t.Cleanup(func() {
		if err := n.stop(); err != nil {
			t.Errorf("stopping %s: %v", n.Name, err)
		}
	})
	if err := n.start(context.Background()); err != nil {
		t.Fatalf("starting %s: %v", n.Name, err)
	}
	return n
}

func (n *Node2) start(ctx context.Context) error {
	if err := n.network(); err != nil {
		return err
	}
	if err := n.b.setNodeAddress(ctx, n.b.NodeName, node1LinkIP, 30); err != nil {
		return err
	}
	if err := n.dirs(); err != nil {
		return err
	}
	if err := n.startHolder(); err != nil {
		return err
	}
	for _, step := range []func(context.Context) error{n.startContainerd, n.startKubelet, n.startProxy, n.startFelix} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return n.b.waitSchedulable(ctx, n.Name)
}

// network makes the namespace and the pair; the node's default route goes
// to the machine, where the API server is.
func (n *Node2) network() error {
	cmds := [][]string{
		{"ip", "netns", "add", node2Netns},
		{"ip", "link", "add", node2HostLink, "type", "veth", "peer", "name", "eth0", "netns", node2Netns},
		{"ip", "addr", "add", node1LinkIP.String() + "/30", "dev", node2HostLink},
		{"ip", "link", "set", node2HostLink, "up"},
		{"ip", "-n", node2Netns, "link", "set", "lo", "up"},
		{"ip", "-n", node2Netns, "addr", "add", node2IP.String() + "/30", "dev", "eth0"},
		{"ip", "-n", node2Netns, "link", "set", "eth0", "up"},
		{"ip", "-n", node2Netns, "route", "add", "default", "via", node1LinkIP.String()},
	}
	for _, c := range cmds {
		if err := run(c[0], c[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// node2Paths are the host paths bound to the second node's own dirs.
func node2Paths() map[string]string {
	m := map[string]string{}
	for _, p := range HostPaths {
		m[p] = filepath.Join(node2Dir, "host", strings.ReplaceAll(strings.TrimPrefix(p, "/"), "/", "-"))
	}
	return m
}

// dirs creates the node's dirs and lays Calico's CNI out in them as on the
// first node, with the node's own name.
func (n *Node2) dirs() error {
	for _, d := range node2Paths() {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	paths := node2Paths()
	bin, conf := filepath.Join(paths["/opt/cni"], "bin"), filepath.Join(paths["/etc/cni"], "net.d")
	for _, d := range []string{bin, conf, node2State} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, f := range []string{"calico", "calico-ipam", "portmap", "bandwidth", "loopback"} {
		if err := copyFile(filepath.Join(CNIBinDir, f), filepath.Join(bin, f), 0o755); err != nil {
			return err
		}
	}
	list, err := CalicoConflist(n.b.root, n.Name)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(conf, filepath.Base(Conflist)), list, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(conf, filepath.Base(CalicoKubeconfig)), n.b.calicoKubeconfig(), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(paths["/var/lib/calico"], "nodename"), []byte(n.Name), 0o644)
}

// startHolder starts the process whose mount namespace the node's
// processes share: every `ip netns exec` would make a fresh one (and
// remount /sys without the cgroup hierarchies), and a kubelet and
// containerd in different ones do not see each other's mounts. The
// processes join its mounts and the node's network namespace by nsenter.
func (n *Node2) startHolder() error {
	ready := filepath.Join(node2Dir, "mounts-ready")
	var script strings.Builder
	for host, own := range node2Paths() {
		fmt.Fprintf(&script, "mkdir -p %s && mount --bind %s %s && ", host, own, host)
	}
	fmt.Fprintf(&script, "touch %s && exec sleep 1000000", ready)
	p, err := n.b.Spawn("node2-mounts", n.b.logPath("node2-mounts"),
		"unshare", "--mount", "--propagation", "slave", "sh", "-c", script.String())
	if err != nil {
		return err
	}
	n.holder = p
	return Poll(context.Background(), 10*time.Second, func() error {
		if p.Exited() {
			return fmt.Errorf("the mount holder exited (log: %s)", n.b.logPath("node2-mounts"))
		}
		if !exists(ready) {
			return fmt.Errorf("mounts not ready")
		}
		return nil
	})
}

// spawn runs argv in the node's network and mount namespaces.
func (n *Node2) spawn(name string, argv ...string) (*testbed.Process, error) {
	mnt := "/proc/" + strconv.Itoa(n.holder.Pid()) + "/ns/mnt"
	return n.b.Spawn(name, n.b.logPath(name), append([]string{"nsenter", "--mount=" + mnt, "--net=" + netnsDir + "/" + node2Netns, "--"}, argv...)...)
}

// stop ends the node's processes, its pods, its namespace and its Node.
func (n *Node2) stop() error {
	for _, p := range []*testbed.Process{n.kubelet, n.felix, n.proxy, n.containerd} {
		if p != nil {
			p.Stop()
		}
	}
	killPids(append(cgroupPids(node2CgroupRoot), socketShimPids(node2Socket)...), "process of "+n.Name, func(string, ...any) {})
	if n.holder != nil {
		n.holder.Stop()
	}
	ctx := context.Background()
	errs := []error{
		sweepNode2(),
		n.b.setNodeAddress(ctx, n.b.NodeName, n.b.NodeIP, 0),
		ignoreNotFound(n.b.Kube.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})),
		n.b.deletePodsBoundTo(ctx, n.Name),
	}
	return errors.Join(errs...)
}

// deletePodsBoundTo deletes, at once, the pods still bound to a node whose
// Node object is gone, as the pod GC does after its quarantine. Left to
// it, the next test would share the API with them for up to a minute: a
// capo-agent pod of a gone node still counts against the DaemonSet's
// maxUnavailable and holds a rolling update of the first node's agent.
func (b *Bed) deletePodsBoundTo(ctx context.Context, node string) error {
	pods, err := b.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return fmt.Errorf("pods left on %s: %w", node, err)
	}
	now := int64(0)
	var errs []error
	for _, p := range pods.Items {
		errs = append(errs, ignoreNotFound(b.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &now})))
	}
	return errors.Join(errs...)
}

// sweepNode2 removes what a second node leaves on the machine: its
// namespace (with its pair, VXLAN device, routes and rules), cgroups and
// dirs. A no-op when there is none.
func sweepNode2() error {
	var errs []error
	killPids(append(cgroupPids(node2CgroupRoot), socketShimPids(node2Socket)...), "process of "+Node2Name, func(string, ...any) {})
	if exists(filepath.Join(netnsDir, node2Netns)) {
		errs = append(errs, run("ip", "netns", "del", node2Netns))
	}
	errs = append(errs, removeCgroupsAt(node2CgroupRoot))
	if err := unmountUnder([]string{node2Dir, node2State}); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, os.RemoveAll(node2Dir), os.RemoveAll(node2State))
	return errors.Join(errs...)
}

// Die stops the node as a machine that loses power: its kubelet,
// containerd, kube-proxy and felix end and its pods' processes are killed,
// no CNI DEL runs, and the pair to the first node goes down.
func (n *Node2) Die() error {
	n.dead = true
	for _, p := range []*testbed.Process{n.kubelet, n.containerd, n.proxy, n.felix} {
		if p != nil {
			_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		}
	}
	killPids(append(cgroupPids(node2CgroupRoot), socketShimPids(node2Socket)...), "process of "+n.Name, func(string, ...any) {})
	return run("ip", "link", "set", node2HostLink, "down")
}
