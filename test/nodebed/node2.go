package nodebed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/build/image"
	"github.com/capo-net/capo/pkg/selection"
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

func (n *Node2) startContainerd(ctx context.Context) error {
	cfg := filepath.Join(node2Dir, "containerd.toml")
	body := fmt.Sprintf(containerdConfig, node2Dir, node2State, node2Socket, PauseImage, CNIBinDir, CNIConfDir)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	p, err := n.spawn("node2-containerd", "env", "FELIX_INTERFACEPREFIX="+InterfacePrefix, "containerd", "--config", cfg)
	if err != nil {
		return err
	}
	n.containerd = p
	if err := waitSocket(p, node2Socket, n.b.logPath("node2-containerd")); err != nil {
		return err
	}
	im := n.b.images
	for ref, idx := range map[string]v1.ImageIndex{PauseImage: im.sleeper, SleeperImage: im.sleeper, EchoImage: im.echo, CapoRepository + ":" + CapoTags[0]: im.capo} {
		archive := filepath.Join(n.b.ImagesDir, "node2-"+strings.NewReplacer("/", "-", ":", "-").Replace(ref)+".tar")
		if err := image.WriteArchive(archive, ref, idx, runtime.GOARCH); err != nil {
			return fmt.Errorf("image %s: %w", ref, err)
		}
		if err := importImage(node2Socket, archive); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node2) startKubelet(ctx context.Context) error {
	if err := makeCgroupRootAt(node2CgroupRoot); err != nil {
		return err
	}
	cfg := filepath.Join(node2Dir, "kubelet.yaml")
	body := fmt.Sprintf(kubeletConfig, node2CgroupRoot, node2Socket, 10250, 10248, NoPressure)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	p, err := n.spawn("node2-kubelet", n.b.Node.Kubelet,
		"--config="+cfg, "--kubeconfig="+n.b.kubeconfig, "--root-dir="+filepath.Join(node2Dir, "kubelet"),
		"--hostname-override="+n.Name, "--node-ip="+n.IP.String(), "--v=2")
	if err != nil {
		return err
	}
	n.kubelet = p
	return nil
}

func (n *Node2) startProxy(ctx context.Context) error {
	p, err := n.spawn("node2-kube-proxy", n.b.Node.Proxy,
		"--kubeconfig="+n.b.kubeconfig, "--hostname-override="+n.Name, "--proxy-mode=iptables",
		"--cluster-cidr="+PodCIDR, "--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"--iptables-localhost-nodeports=false", "--metrics-bind-address=127.0.0.1:10249",
		"--healthz-bind-address=127.0.0.1:10256", "--v=1")
	if err != nil {
		return err
	}
	n.proxy = p
	return nil
}

// startFelix runs the node's felix once its Node exists: its address and
// tunnel address as the first node's, from the same pools.
func (n *Node2) startFelix(ctx context.Context) error {
	err := Poll(ctx, 60*time.Second, func() error {
		_, err := n.b.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("%w (kubelet log: %s)", err, n.b.logPath("node2-kubelet"))
	}
	tunnel, err := n.b.allocateTunnelAddrFor(ctx, n.Name)
	if err != nil {
		return err
	}
	if err := n.b.annotateAddresses(ctx, n.Name, n.IP, 30, tunnel); err != nil {
		return err
	}
	dir := filepath.Join(node2Dir, "felix")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	env := n.b.felixEnvFor(n.Name, dir, 9099)
	argv := append([]string{"env", "-i"}, env...)
	argv = append(argv, n.b.Felix, "-c", filepath.Join(dir, "felix.cfg"))
	p, err := n.spawn("node2-felix", argv...)
	if err != nil {
		return err
	}
	n.felix = p
	return Poll(ctx, 90*time.Second, func() error {
		if p.Exited() {
			return fmt.Errorf("felix on %s exited (log: %s)", n.Name, n.b.logPath("node2-felix"))
		}
		return run("ip", "-n", node2Netns, "link", "show", "vxlan.calico")
	})
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

// setNodeAddress annotates node's address (its VXLAN parent for felix);
// prefix 0 means the prefix of the machine's interface holding ip.
func (b *Bed) setNodeAddress(ctx context.Context, node string, ip net.IP, prefix int) error {
	if prefix == 0 {
		var err error
		if prefix, err = hostPrefix(ip); err != nil {
			return err
		}
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"projectcalico.org/IPv4Address":"%s/%d"}}}`, ip, prefix)
	_, err := b.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// waitSchedulable waits until node is Ready and untainted.
func (b *Bed) waitSchedulable(ctx context.Context, node string) error {
	return Poll(ctx, 120*time.Second, func() error {
		nd, err := b.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !nodeReady(nd) {
			return fmt.Errorf("node %s not Ready", node)
		}
		for _, t := range nd.Spec.Taints {
			if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
				return fmt.Errorf("node %s still tainted %s", node, t.Key)
			}
		}
		return nil
	})
}

func waitSocket(p *testbed.Process, socket, log string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			return nil
		}
		if p.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("containerd did not come up (log: %s)", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func importImage(socket, archive string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command("ctr", "--address", socket, "--namespace=k8s.io", "images", "import", "--all-platforms", "--digests", "-")
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %w\n%s", archive, err, out)
	}
	return nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// conflist is the node's Calico conflist, as its runtime reads it.
func (n *Node2) conflist() ([]byte, error) {
	return os.ReadFile(filepath.Join(node2Paths()["/etc/cni"], "net.d", filepath.Base(Conflist)))
}

// OptIn annotates this node alone and waits until its agent has put
// capo-ipam into its chain; after t it opts out and waits for Calico's.
func (n *Node2) OptIn(t testing.TB) {
	t.Helper()
	capoIn := func(want bool) func() error {
		return func() error {
			list, err := n.conflist()
			if err == nil && bytes.Contains(list, []byte(`"capo-ipam"`)) != want {
				err = fmt.Errorf("%s's conflist has capo-ipam: %v, want %v", n.Name, !want, want)
			}
			return err
		}
	}
	n.b.annotateNodeNamed(t, n.Name, selection.Enabled)
	Eventually(t, 60*time.Second, "the agent on "+n.Name+" to install capo-ipam on opt-in", capoIn(true))
	t.Cleanup(func() {
		if n.dead {
			return // nothing runs there to opt out
		}
		n.b.annotateNodeNamed(t, n.Name, "")
		Eventually(t, 30*time.Second, "Calico's own chain back on "+n.Name, capoIn(false))
	})
}

// WaitAgent waits until the chart's DaemonSet runs a ready agent here.
func (n *Node2) WaitAgent(t testing.TB) {
	t.Helper()
	Eventually(t, 2*time.Minute, "capo's agent ready on "+n.Name, func() error {
		pods, err := n.b.Kube.CoreV1().Pods(Namespace).List(context.Background(), metav1.ListOptions{
			LabelSelector: AgentSelector, FieldSelector: "spec.nodeName=" + n.Name,
		})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		return fmt.Errorf("%d agent pods on %s, none ready", len(pods.Items), n.Name)
	})
}

// RoutedOverVXLAN checks that the route to ip from netns ("" for the
// machine's, the first node's) leaves by felix's vxlan.calico: the address
// lives on the other node.
func RoutedOverVXLAN(netns, ip string) error {
	args := []string{"route", "get", ip}
	if netns != "" {
		args = append([]string{"-n", netns}, args...)
	}
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	if !strings.Contains(string(out), "dev vxlan.calico") {
		return fmt.Errorf("the route to %s (netns %q) is %s, want one by vxlan.calico", ip, netns, strings.TrimSpace(string(out)))
	}
	return nil
}

// HostRoute is the first node's route to exactly ip/32, empty when none.
func HostRoute(ip string) (string, error) {
	out, err := exec.Command("ip", "route", "show", "exact", ip+"/32").CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Netns is the node's network namespace.
func (n *Node2) Netns() string { return node2Netns }

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
