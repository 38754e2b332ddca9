package nodebed

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/test/testbed"
)

// StateDir is the second node's capo state dir (its /var/lib/capo, as its
// capo-ipam and agent see it): the journal and the ADD records.
func (n *Node2) StateDir() journal.Dir {
	return journal.Dir{Root: node2Paths()[journal.DefaultStateDir]}
}

// AgentMetrics is the second node's agent's /metrics: it serves on the
// node's network, on the chart's metrics port.
func (n *Node2) AgentMetrics() (string, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + n.IP.String() + ":9467/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// Reboot takes the node down as a reboot does and brings it back: its
// kubelet, containerd, kube-proxy and felix killed, every pod's processes
// (pause and containers) and containerd's shims killed, the pods' network
// namespaces unmounted and removed (a reboot leaves none; their veths and
// routes go with them), the pods' cgroups gone; then containerd, the
// kubelet, kube-proxy and felix start again on the same root dirs, as
// the node's init would. Nothing runs a CNI DEL while the node is down:
// the restarted runtime runs them, for sandboxes whose namespaces are
// gone, when the kubelet stops them. Reboot returns once the node's
// processes run again; the kubelet brings the pods back on its own.
func (n *Node2) Reboot(ctx context.Context) error {
	for _, p := range []*testbed.Process{n.kubelet, n.containerd, n.proxy, n.felix} {
		if p != nil {
			_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		}
	}
	killPids(append(cgroupPids(node2CgroupRoot), socketShimPids(node2Socket)...), "process of "+n.Name, func(string, ...any) {})
	if err := n.removePodNetns(); err != nil {
		return err
	}
	if err := removeCgroupsAt(node2CgroupRoot); err != nil {
		return err
	}
	if err := n.runContainerd(); err != nil {
		return err
	}
	if err := n.startKubelet(ctx); err != nil {
		return err
	}
	if err := n.startProxy(ctx); err != nil {
		return err
	}
	return n.runFelix(ctx)
}

// removePodNetns unmounts and removes the pods' network namespaces
// (containerd's cni-* under /run/netns), seen from the node's mount
// namespace, where containerd mounted them. The node's own namespace is
// not among them.
func (n *Node2) removePodNetns() error {
	script := `for f in /run/netns/cni-*; do [ -e "$f" ] || continue; umount "$f" 2>/dev/null; rm -f "$f" || exit 1; done; ls /run/netns | grep '^cni-' && exit 1; exit 0`
	out, err := exec.Command("nsenter", "--mount=/proc/"+strconv.Itoa(n.holder.Pid())+"/ns/mnt", "--", "sh", "-c", script).CombinedOutput()
	if err != nil {
		return fmt.Errorf("removing %s's pod network namespaces: %w: %s", n.Name, err, out)
	}
	return nil
}

// PodNetns lists the pods' network namespaces on the node.
func (n *Node2) PodNetns() ([]string, error) {
	out, err := exec.Command("nsenter", "--mount=/proc/"+strconv.Itoa(n.holder.Pid())+"/ns/mnt", "--", "sh", "-c", `ls /run/netns | grep '^cni-' || true`).Output()
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}
