package node

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/test/nodebed"
	"github.com/capo-net/capo/test/testbed"
)

// A node reboot: the second node (opted in) has every sandbox killed, its
// pods' network namespaces gone, and its containerd, kubelet, kube-proxy
// and felix started again. The restarted runtime runs the CNI DELs of the
// dead sandboxes when the kubelet stops them, before capo's agent is up:
// the agent's own pod is one of the dead sandboxes, and comes back with
// the others. capo-ipam journals those DELs (nothing released); the new
// agent replays them: reserve, then release. Throughout, every address a
// member had is allocated to that member or reserved, never free and
// never another pod's (a poller reads Calico IPAM and the IPReservations
// at most every 200 ms); every pod comes back Running (no teardown blocks); the
// journal drains. The new sandboxes' ADDs also run before the agent is up:
// capo-ipam finds each member's own teardown in the journal and waits for
// the agent (at most 10 s), which replays that teardown first and gives
// the member its address back; every member has its own address again,
// allocated to its new sandbox and no longer reserved. Clients on the
// first node reach every member, and a client that probed db-0's address
// all along never got an answer from another pod.
func TestNodeRebootHoldsAddressesAndDrainsTheJournal(t *testing.T) {
	ctx := context.Background()
	n2 := bed.StartNode2(t)
	n2.WaitAgent(t)
	pool, cidr := bed.NewPool(t, 25) // two blocks of 64: one per node
	ns := bed.Namespace(t, "reboot", pool, true)
	n2.OptIn(t)

	const members = 3
	bed.EchoStatefulSet(t, ns, "db", members, nodebed.Echo{Node: n2.Name})
	before := bed.WaitRunning(t, ns, "app=db", members)
	for _, p := range before {
		if p.Spec.NodeName != n2.Name {
			t.Fatalf("%s runs on %s, want %s", p.Name, p.Spec.NodeName, n2.Name)
		}
	}
	dialer := bed.EchoClientOn(t, ns, "dialer", bed.NodeName, "")
	probe := bed.EchoClientOn(t, ns, "probe", bed.NodeName, nodebed.EchoAddr(before["db-0"]))
	answered(t, ns, probe.Name, before["db-0"], time.Time{})
	agent := agentOn(t, n2.Name)
	netns, err := n2.PodNetns()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s before the reboot: %d pod network namespaces, members %s", n2.Name, len(netns), memberIPs(before))

	g := guardAddresses(t, ns, cidr, before, n2.StateDir())
	start := time.Now()
	if err := n2.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s rebooted: its processes run again after %s", n2.Name, time.Since(start).Round(100*time.Millisecond))

	now := map[string]*corev1.Pod{}
	for name, old := range before {
		nodebed.Eventually(t, 3*time.Minute, name+" Running again on a new sandbox", func() error {
			p := bed.Pod(ns, name)
			switch {
			case p == nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || !ready(p):
				return fmt.Errorf("%s not running and ready", name)
			case p.UID != old.UID:
				return fmt.Errorf("%s is another pod (uid %s): a reboot keeps the pod", name, p.UID)
			case p.Annotations["cni.projectcalico.org/containerID"] == old.Annotations["cni.projectcalico.org/containerID"]:
				return fmt.Errorf("%s still on its old sandbox", name)
			}
			now[name] = p
			return nil
		})
	}
	n2.WaitAgent(t)
	agentNow := agentOn(t, n2.Name)
	var agentStarted time.Time
	for _, c := range agentNow.Status.ContainerStatuses {
		if c.State.Running != nil {
			agentStarted = c.State.Running.StartedAt.Time
		}
	}
	if agentNow.UID != agent.UID || !agentStarted.After(start.Add(-time.Second)) {
		t.Fatalf("the agent pod on %s: uid %s started %s; want uid %s restarted after the reboot (%s)", n2.Name, agentNow.UID, agentStarted, agent.UID, start)
	}

	nodebed.Eventually(t, 90*time.Second, "the journal on "+n2.Name+" to drain", func() error {
		pending, err := n2.StateDir().Pending()
		if err != nil {
			return err
		}
		text, err := n2.AgentMetrics()
		if err != nil {
			return err
		}
		if depth := testbed.SumMetric(text, "capo_agent_journal_depth"); len(pending) > 0 || depth != 0 {
			return fmt.Errorf("%d records pending, capo_agent_journal_depth %v", len(pending), depth)
		}
		return nil
	})
	text, err := n2.AgentMetrics()
	if err != nil {
		t.Fatal(err)
	}
	replayed := testbed.SumMetric(text, "capo_agent_del_decisions_total", `path="journal"`)
	reserved := testbed.SumMetric(text, "capo_agent_del_decisions_total", `outcome="reserved"`, `path="journal"`)
	live := testbed.SumMetric(text, "capo_agent_del_decisions_total", `path="socket"`)
	seen := g.journaled()
	t.Logf("the agent restarted at %s; it replayed %v journaled DELs (%v reserved), answered %v live; the poller saw %d members' old sandboxes journaled %v",
		agentStarted.Format(time.TimeOnly), replayed, reserved, live, len(seen), seen)
	if reserved < members {
		t.Fatalf("the restarted agent replayed %v journaled DELs of selected pods (%v in all), want at least %d: the runtime's DELs of the dead sandboxes did not reach capo-ipam before the agent was up", reserved, replayed, members)
	}

	returned := 0
	for name, old := range before {
		p := now[name]
		if p.Status.PodIP == old.Status.PodIP {
			returned++
			nodebed.Eventually(t, 30*time.Second, name+"'s address allocated to its new sandbox and no longer reserved", func() error {
				return bed.AllocatedTo(ctx, cidr, p.Status.PodIP, p)
			})
			continue
		}
		if err := bed.HeldOn(ctx, n2.Name, cidr, old.Status.PodIP, old); err != nil {
			t.Fatalf("%s came back with %s, not its %s, which must stay held for it: %v", name, p.Status.PodIP, old.Status.PodIP, err)
		}
	}
	t.Logf("%d of %d members came back with their own addresses (%s)", returned, members, memberIPs(now))
	if returned < members {
		t.Fatalf("%d of %d members came back with their own addresses: a member's ADD did not wait for the agent to replay its teardown", returned, members)
	}

	for _, p := range now {
		reaches(t, ns, dialer.Name, p, cidr)
	}
	if now["db-0"].Status.PodIP == before["db-0"].Status.PodIP {
		answered(t, ns, probe.Name, now["db-0"], start)
	}
	onlyMember(t, ns, probe.Name, "db-0")
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("over %d polls of Calico IPAM and the IPReservations, every member's address was its own or reserved", g.polls)
}

// ready reports the pod's Ready condition.
func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// agentOn is the chart's agent pod on node.
func agentOn(t *testing.T, node string) *corev1.Pod {
	t.Helper()
	pods, err := bed.Kube.CoreV1().Pods(nodebed.Namespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: nodebed.AgentSelector, FieldSelector: "spec.nodeName=" + node,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d agent pods on %s, want 1", len(pods.Items), node)
	}
	return &pods.Items[0]
}

func memberIPs(pods map[string]*corev1.Pod) string {
	var s []string
	for name, p := range pods {
		s = append(s, name+"="+p.Status.PodIP)
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// addressGuard polls Calico IPAM and the IPReservations: every address a
// member had must be allocated to that member (any sandbox) or reserved.
// It also notes which of the members' old sandboxes it saw journaled.
type addressGuard struct {
	done     chan struct{}
	finished chan struct{}

	mu         sync.Mutex
	violations []string
	polls      int
	seen       map[string]bool
}

func guardAddresses(t *testing.T, ns string, cidr *net.IPNet, members map[string]*corev1.Pod, state journal.Dir) *addressGuard {
	g := &addressGuard{done: make(chan struct{}), finished: make(chan struct{}), seen: map[string]bool{}}
	sandboxes := map[string]string{}
	for name, p := range members {
		sandboxes[p.Annotations["cni.projectcalico.org/containerID"]] = name
	}
	go func() {
		defer close(g.finished)
		ctx := context.Background()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if entries, err := state.Pending(); err == nil {
				g.mu.Lock()
				for _, e := range entries {
					if e.Record != nil && sandboxes[e.Record.Request.ContainerID] != "" {
						g.seen[sandboxes[e.Record.Request.ContainerID]] = true
					}
				}
				g.mu.Unlock()
			}
			if v := checkHeld(ctx, ns, cidr, members); v != "" {
				g.mu.Lock()
				g.violations = append(g.violations, time.Now().Format(time.StampMilli)+": "+v)
				g.mu.Unlock()
			}
			g.mu.Lock()
			g.polls++
			g.mu.Unlock()
			select {
			case <-g.done:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { _ = g.stop() })
	return g
}

// checkHeld says what is wrong with the members' addresses, "" if nothing.
// Errors reading the datastore are not violations.
func checkHeld(ctx context.Context, ns string, cidr *net.IPNet, members map[string]*corev1.Pod) string {
	allocs, err := bed.Allocations(ctx, cidr)
	if err != nil {
		return ""
	}
	reserved, err := bed.Reserved(ctx)
	if err != nil {
		return ""
	}
	var bad []string
	for name, p := range members {
		ip := p.Status.PodIP
		a, ok := allocs[ip]
		switch {
		case ok && (a.Pod != name || a.Namespace != ns):
			bad = append(bad, fmt.Sprintf("%s's %s allocated to %s/%s", name, ip, a.Namespace, a.Pod))
		case !ok && !reserved[ip]:
			bad = append(bad, fmt.Sprintf("%s's %s neither allocated nor reserved", name, ip))
		}
	}
	sort.Strings(bad)
	return strings.Join(bad, "; ")
}

func (g *addressGuard) journaled() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for name := range g.seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// stop ends the polling and reports every violation seen.
func (g *addressGuard) stop() error {
	select {
	case <-g.done:
	default:
		close(g.done)
	}
	<-g.finished
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.violations) > 0 {
		return fmt.Errorf("over %d polls, %d found a member's address unprotected: %s", g.polls, len(g.violations), strings.Join(g.violations, "\n"))
	}
	return nil
}
