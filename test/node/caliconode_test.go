package node

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/nodebed"
)

// calico-node's pod replaced (a Calico upgrade): its install-cni writes
// Calico's own conflist, without capo-ipam, before the agent puts capo
// back. Members torn down and other pods started in between go through
// plain calico-ipam. The agent saw the replacement coming (the old pod
// terminating) and holds the members' addresses, so a poller reading
// Calico's blocks and the IPReservations back to back never finds a
// member's address free and unreserved, nor given to another pod; once
// the new pod is initialized and capo is back, the running members' holds
// go. The agent is stopped (SIGSTOP) from just after it held (or 3 s into
// the old pod's 4 s shutdown, were it not to hold) until the teardowns are
// done: its re-apply, ~0.2 s after a rewrite, then comes after them, so
// they always fall in the window. capo-controller does not run meanwhile.
func TestCalicoNodeReplacedLosesNoMemberAddress(t *testing.T) {
	ctx := context.Background()
	pool, cidr := bed.NewPool(t, 26)
	ns := bed.Namespace(t, "restart", pool, true)
	web := bed.Namespace(t, "restart-web", pool, false)
	bed.OptIn(t)
	withoutController(ctx, t)
	h := bed.WatchPods(t, ns)
	bed.StatefulSet(t, ns, "db", 5, nodebed.Workload{})
	cn := bed.CalicoNode(t)
	nodebed.Eventually(t, 30*time.Second, "capo back in the chain after calico-node's first start", capoInChain(true))
	g := guardMembers(t, ns, cidr, h)

	members := bed.WaitRunning(t, ns, "app=db", 5)
	bed.Restart(t, cn)
	// The agent holds as the old pod terminates (not asserted here: the
	// guard is the assertion; without holds it finds the hole).
	_ = nodebed.Poll(ctx, 3*time.Second, func() error {
		reserved, err := bed.Reserved(ctx)
		for name, p := range members {
			if err == nil && !reserved[p.Status.PodIP] {
				err = fmt.Errorf("%s's %s not held", name, p.Status.PodIP)
			}
		}
		return err
	})
	thaw := freezeAgent(t)
	nodebed.Eventually(t, 60*time.Second, "the new calico-node pod's install-cni rewriting the conflist", capoInChain(false))
	frozen := time.Now()
	deleteRunningOf(ctx, t, ns, "app=db", 2)
	bed.Deployment(t, web, "web", 3, nodebed.Workload{})
	bed.WaitRunning(t, web, "app=web", 3)
	nodebed.Eventually(t, 60*time.Second, "the deleted members torn down", func() error { return tornDown(ctx, cidr, h) })
	t.Logf("teardowns and starts in the window done %s after the rewrite", time.Since(frozen).Round(100*time.Millisecond))
	thaw()

	nodebed.Eventually(t, 30*time.Second, "capo back in the chain", capoInChain(true))
	current := bed.WaitRunning(t, ns, "app=db", 5)
	nodebed.Eventually(t, 30*time.Second, "the running members' holds let go", func() error {
		reserved, err := bed.Reserved(ctx)
		if err != nil {
			return err
		}
		for name, p := range current {
			if reserved[p.Status.PodIP] {
				return fmt.Errorf("%s's %s still held", name, p.Status.PodIP)
			}
		}
		return nil
	})
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d polls found every member's address protected; holds released %v, kept %v", g.polls, agentMetric(t, "capo_agent_cni_rewrite_holds_total", `result="released"`), agentMetric(t, "capo_agent_cni_rewrite_holds_total", `result="kept"`))
}

// withoutController scales capo-controller to none for the test: the
// agent is stopped long enough to turn not ready, and the controller's
// cover of such a node (it reserves its terminating pods' addresses itself)
// would hide whether the agent's holds did the work.
func withoutController(ctx context.Context, t *testing.T) {
	t.Helper()
	scale := func(n int) {
		if _, err := bed.Kubectl(ctx, "-n", nodebed.Namespace, "scale", "deployment", "capo-controller", fmt.Sprintf("--replicas=%d", n)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := bed.Kube.AppsV1().Deployments(nodebed.Namespace).Get(ctx, "capo-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicas := int(*d.Spec.Replicas)
	scale(0)
	t.Cleanup(func() {
		scale(replicas)
		if err := nodebed.Poll(ctx, 2*time.Minute, func() error {
			d, err := bed.Kube.AppsV1().Deployments(nodebed.Namespace).Get(ctx, "capo-controller", metav1.GetOptions{})
			if err == nil && int(d.Status.AvailableReplicas) != replicas {
				err = fmt.Errorf("%d of %d controller replicas available", d.Status.AvailableReplicas, replicas)
			}
			return err
		}); err != nil {
			t.Error(err)
		}
	})
	nodebed.Eventually(t, 2*time.Minute, "no capo-controller running", func() error {
		pods, err := bed.Kube.CoreV1().Pods(nodebed.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controller"})
		if err == nil && len(pods.Items) > 0 {
			err = fmt.Errorf("%d controller pods left", len(pods.Items))
		}
		return err
	})
}

// capoInChain: the node's conflist calls capo-ipam (want), or not.
func capoInChain(want bool) func() error {
	return func() error {
		st, err := nodebed.ReadCNI()
		if err != nil {
			return err
		}
		if got := strings.Contains(string(st.Conflist), "capo-ipam"); got != want {
			return fmt.Errorf("capo-ipam in the conflist: %v", got)
		}
		return nil
	}
}

// freezeAgent stops the agent's process until the returned thaw (or the
// test's end).
func freezeAgent(t *testing.T) (thaw func()) {
	t.Helper()
	pid, err := nodebed.AgentPID()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	thaw = func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(thaw)
	return thaw
}

// deleteRunningOf deletes n running pods of ns matching selector.
func deleteRunningOf(ctx context.Context, t *testing.T, ns, selector string, n int) {
	t.Helper()
	pods, err := bed.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	grace := int64(1)
	for _, p := range pods.Items {
		if n > 0 && p.DeletionTimestamp == nil {
			if err := bed.Kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
				t.Fatal(err)
			}
			n--
		}
	}
}

// tornDown: no member pod seen deleted has its address allocated to its
// sandbox any more (Calico's containerID annotation names it).
func tornDown(ctx context.Context, cidr *net.IPNet, h *nodebed.History) error {
	allocs, err := bed.Allocations(ctx, cidr)
	if err != nil {
		return err
	}
	for _, p := range h.Pods() {
		sandbox := p.Annotations["cni.projectcalico.org/containerID"]
		if p.DeletionTimestamp == nil || sandbox == "" {
			continue
		}
		for _, ip := range h.IPs(p.UID) {
			if a, ok := allocs[ip]; ok && strings.HasSuffix(a.Handle, "."+sandbox) {
				return fmt.Errorf("%s's %s still allocated to its sandbox", p.Name, ip)
			}
		}
	}
	return nil
}

// memberGuard polls Calico's blocks, then the IPReservations: every
// address a member of ns ever had must be allocated to a pod of that
// member's name, or reserved.
type memberGuard struct {
	done, finished chan struct{}
	violations     []string
	polls          int
}

func guardMembers(t *testing.T, ns string, cidr *net.IPNet, h *nodebed.History) *memberGuard {
	g := &memberGuard{done: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(g.finished)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if v := unprotected(context.Background(), ns, cidr, h); v != "" {
				g.violations = append(g.violations, time.Now().Format(time.StampMilli)+": "+v)
			}
			g.polls++
			select {
			case <-g.done:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		if err := g.stop(); err != nil {
			t.Error(err)
		}
	})
	return g
}

func unprotected(ctx context.Context, ns string, cidr *net.IPNet, h *nodebed.History) string {
	allocs, err := bed.Allocations(ctx, cidr)
	if err != nil {
		return ""
	}
	reserved, err := bed.Reserved(ctx)
	if err != nil {
		return ""
	}
	var bad []string
	for _, p := range h.Pods() {
		for _, ip := range h.IPs(p.UID) {
			a, ok := allocs[ip]
			switch {
			case ok && (a.Namespace != ns || a.Pod != p.Name):
				bad = append(bad, fmt.Sprintf("%s's %s allocated to %s/%s", p.Name, ip, a.Namespace, a.Pod))
			case !ok && !reserved[ip]:
				bad = append(bad, fmt.Sprintf("%s's %s free and unreserved", p.Name, ip))
			}
		}
	}
	sort.Strings(bad)
	return strings.Join(bad, "; ")
}

// stop ends the polling and reports every violation seen, once.
func (g *memberGuard) stop() error {
	select {
	case <-g.done:
		return nil // reported already
	default:
		close(g.done)
	}
	<-g.finished
	if len(g.violations) > 0 {
		return fmt.Errorf("over %d polls, %d found a member's address unprotected:\n%s", g.polls, len(g.violations), strings.Join(g.violations, "\n"))
	}
	return nil
}
