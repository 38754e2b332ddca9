package nodebed

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/selection"
)

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
		n.OptOut(t)
	})
}

// OptOut removes the node's annotation and waits until its agent has put
// Calico's chain back.
func (n *Node2) OptOut(t testing.TB) {
	t.Helper()
	n.b.annotateNodeNamed(t, n.Name, "")
	Eventually(t, 30*time.Second, "Calico's own chain back on "+n.Name, func() error {
		list, err := n.conflist()
		if err == nil && bytes.Contains(list, []byte(`"capo-ipam"`)) {
			err = fmt.Errorf("%s's conflist still has capo-ipam", n.Name)
		}
		return err
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

// RoutedAcross checks that the route to ip from netns ("" for the
// machine's, the first node's) is felix's to the other node: by
// vxlan.calico, or unencapsulated via the other node's address.
func RoutedAcross(netns, ip string) error {
	args := []string{"route", "get", ip}
	if netns != "" {
		args = append([]string{"-n", netns}, args...)
	}
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	if want := AcrossRoute(netns == ""); !strings.Contains(string(out), want) {
		return fmt.Errorf("the route to %s (netns %q) is %s, want %q", ip, netns, strings.TrimSpace(string(out)), want)
	}
	return nil
}

// AcrossRoute is what a route of felix's to the other node says: from the
// first node (fromFirst) or from the second.
func AcrossRoute(fromFirst bool) string {
	switch {
	case !Unencapsulated:
		return "dev vxlan.calico"
	case fromFirst:
		return "via " + node2IP.String()
	default:
		return "via " + node1LinkIP.String()
	}
}

// HostRoute is the first node's route to exactly ip/32, empty when none.
func HostRoute(ip string) (string, error) { return HostRouteIn("", ip) }

// HostRouteIn is the route to exactly ip/32 in netns ("" for the
// machine's, the first node's), empty when none.
func HostRouteIn(netns, ip string) (string, error) {
	args := []string{"route", "show", "exact", ip + "/32"}
	if netns != "" {
		args = append([]string{"-n", netns}, args...)
	}
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Netns is the node's network namespace.
func (n *Node2) Netns() string { return node2Netns }
