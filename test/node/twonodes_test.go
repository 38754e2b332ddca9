package node

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/test/nodebed"
)

// A second node (its own network namespace, containerd, kubelet,
// kube-proxy and felix) joins the first over VXLAN (or, in the bed's
// unencapsulated configuration, by felix's routes via the other node's
// address). The chart's DaemonSet
// runs on both. Pods reach each other across the nodes with Calico's own
// chain on both, and with the second node alone opted in; there, a
// StatefulSet member deleted comes back with its address and a client on
// the first node, probing it all along, reaches it again and only it.
func TestTrafficAcrossNodes(t *testing.T) {
	n2 := bed.StartNode2(t)
	n2.WaitAgent(t)
	pool, cidr := bed.NewPool(t, 25) // two blocks of 64: one per node
	ns := bed.Namespace(t, "two-nodes", pool, true)

	servers := map[string]*corev1.Pod{}
	clients := map[string]*corev1.Pod{}
	for i, node := range []string{bed.NodeName, n2.Name} {
		name := fmt.Sprintf("s%d", i+1)
		bed.EchoStatefulSet(t, ns, name, 1, nodebed.Echo{Node: node})
		servers[node] = bed.WaitRunning(t, ns, "app="+name, 1)[name+"-0"]
		clients[node] = bed.EchoClientOn(t, ns, fmt.Sprintf("c%d", i+1), node, "")
	}
	for node, s := range servers {
		if s.Spec.NodeName != node {
			t.Fatalf("%s runs on %s, want %s", s.Name, s.Spec.NodeName, node)
		}
	}
	crossesNodes(t, n2, servers[n2.Name], servers[bed.NodeName])
	for _, c := range clients {
		for _, s := range servers {
			reaches(t, ns, c.Name, s, cidr)
		}
	}

	n2.OptIn(t)
	bed.EchoStatefulSet(t, ns, "db", 1, nodebed.Echo{Node: n2.Name})
	old := bed.WaitRunning(t, ns, "app=db", 1)["db-0"]
	probe := bed.EchoClientOn(t, ns, "probe", bed.NodeName, nodebed.EchoAddr(old))
	answered(t, ns, probe.Name, old, time.Time{})
	start := time.Now()
	now := deletedComesBackOn(t, ns, cidr, old, n2.Name)
	answered(t, ns, probe.Name, now, start)
	for _, c := range clients {
		reaches(t, ns, c.Name, now, cidr)
	}
	onlyMember(t, ns, probe.Name, old.Name)
}

// deletedComesBackOn deletes old with kubectl: its address is held while
// it is away, and its StatefulSet's new pod comes back on node with that
// address, allocated to its new sandbox and no longer reserved.
func deletedComesBackOn(t *testing.T, ns string, cidr *net.IPNet, old *corev1.Pod, node string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if _, err := bed.Kubectl(ctx, "-n", ns, "delete", "pod", old.Name, "--timeout=90s"); err != nil {
		t.Fatal(err)
	}
	heldAnywhere(t, cidr, old)
	now := back(t, ns, old, false)
	if now.Spec.NodeName != node {
		t.Fatalf("%s came back on %s, want %s", now.Name, now.Spec.NodeName, node)
	}
	nodebed.Eventually(t, 30*time.Second, "the address allocated to the new sandbox and no longer reserved", func() error {
		return bed.AllocatedTo(ctx, cidr, now.Status.PodIP, now)
	})
	return now
}

// crossesNodes checks that each node routes the other's pod by felix's
// route to the other node (vxlan.calico, or via the other node's address
// unencapsulated), so a client that reaches it went across. Felix
// programs them once it has the other node's block and tunnel address,
// and restarts (exit 129) when its config changes: on a busy machine that
// can take a minute.
func crossesNodes(t *testing.T, n2 *nodebed.Node2, onNode2, onNode1 *corev1.Pod) {
	t.Helper()
	nodebed.Eventually(t, 90*time.Second, "felix's routes across the nodes", func() error {
		if err := nodebed.RoutedAcross("", onNode2.Status.PodIP); err != nil {
			return err
		}
		return nodebed.RoutedAcross(n2.Netns(), onNode1.Status.PodIP)
	})
}

// heldAnywhere waits until old's address is in an IPReservation and not
// allocated, or already allocated to old's successor: capo reserved it on
// whichever node old ran.
func heldAnywhere(t *testing.T, cidr *net.IPNet, old *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	ip := old.Status.PodIP
	nodebed.Eventually(t, 60*time.Second, old.Name+"'s address held or returned", func() error {
		allocs, err := bed.Allocations(ctx, cidr)
		if err != nil {
			return err
		}
		if a, ok := allocs[ip]; ok {
			if a.Pod == old.Name && a.Handle != "k8s-pod-network."+old.Annotations["cni.projectcalico.org/containerID"] {
				return nil // the successor has it
			}
			return fmt.Errorf("%s still allocated to %+v", ip, a)
		}
		reserved, err := bed.Reserved(ctx)
		if err != nil {
			return err
		}
		if !reserved[ip] {
			return fmt.Errorf("%s neither allocated nor reserved: Calico may hand it out", ip)
		}
		return nil
	})
}

// returnAddress anyNode: a StatefulSet member moved from the first node to
// the second takes its address along. The address is then borrowed (its
// block is the first node's); the first node's felix routes it to the
// second by a /32 (over VXLAN, or via the second node's address
// unencapsulated), which beats its own block's blackhole, and
// clients on both nodes reach the member there, and only it, throughout.
// Then the member ends for good (scaled away, held until its short
// reservation time, released by capo-controller): the address is free in
// Calico's IPAM and neither node routes it by a /32 any more.
func TestAnyNodeMemberTakesItsAddressAcross(t *testing.T) {
	ctx := context.Background()
	a := memberOnTheFirstNode(t, "any-node")
	n2, ns, cidr, old, probe, dialer := a.n2, a.ns, a.cidr, a.old, a.probe, a.dialer

	cordon(t, bed.NodeName)
	start := time.Now()
	now := deletedComesBackOn(t, ns, cidr, old, n2.Name)
	if host, err := bed.BlockHost(ctx, now.Status.PodIP); err != nil || host != bed.NodeName {
		t.Fatalf("%s is in a block of node %q (%v), want %s's: not borrowed", now.Status.PodIP, host, err, bed.NodeName)
	}
	nodebed.Eventually(t, 30*time.Second, "the first node's /32 to the borrowed address, to the second node", func() error {
		r, err := nodebed.HostRoute(now.Status.PodIP)
		if err == nil && !strings.Contains(r, nodebed.AcrossRoute(true)) {
			err = fmt.Errorf("the first node's route to %s/32 is %q", now.Status.PodIP, r)
		}
		return err
	})
	answered(t, ns, probe.Name, now, start)
	reaches(t, ns, probe.Name, now, cidr)
	reaches(t, ns, dialer.Name, now, cidr)
	onlyMember(t, ns, probe.Name, old.Name)

	if r, err := nodebed.HostRouteIn(n2.Netns(), now.Status.PodIP); err != nil || !strings.Contains(r, "dev "+nodebed.InterfacePrefix) {
		t.Fatalf("the second node's route to %s/32 is %q (%v), want its veth's", now.Status.PodIP, r, err)
	}
	endForGood(t, ns, "db")
	nodebed.Eventually(t, 30*time.Second, "db-0's address held", func() error {
		return bed.HeldOn(ctx, n2.Name, cidr, now.Status.PodIP, now)
	})
	releasedUnrouted(t, n2, cidr, now.Status.PodIP)
}

// endForGood scales the StatefulSet to 0, keeping its removed members'
// addresses for a short reservation time (capo.io/ip-reserve-time), long
// enough to see them held before capo-controller releases them.
func endForGood(t *testing.T, ns, set string) {
	t.Helper()
	ctx := context.Background()
	if _, err := bed.Kubectl(ctx, "-n", ns, "annotate", "statefulset", set,
		release.ScaleDownAnnotation+"=keep", release.TTLAnnotation+"=5s"); err != nil {
		t.Fatal(err)
	}
	if _, err := bed.Kubectl(ctx, "-n", ns, "scale", "statefulset", set, "--replicas=0"); err != nil {
		t.Fatal(err)
	}
}

// releasedUnrouted waits until ip is released (neither allocated in
// Calico's IPAM nor reserved) and routed by a /32 on neither node: the
// second node sends it to the first, whose block it is.
func releasedUnrouted(t *testing.T, n2 *nodebed.Node2, cidr *net.IPNet, ip string) {
	t.Helper()
	ctx := context.Background()
	nodebed.Eventually(t, 30*time.Second, ip+" released", func() error {
		reserved, err := bed.Reserved(ctx)
		if err != nil || reserved[ip] {
			return fmt.Errorf("%s still reserved (%v)", ip, err)
		}
		allocs, err := bed.Allocations(ctx, cidr)
		if a, ok := allocs[ip]; err != nil || ok {
			return fmt.Errorf("%s allocated to %+v (%v)", ip, a, err)
		}
		return nil
	})
	nodebed.Eventually(t, 30*time.Second, "no /32 to "+ip+" on either node", func() error {
		for _, netns := range []string{"", n2.Netns()} {
			r, err := nodebed.HostRouteIn(netns, ip)
			if err == nil && r != "" {
				err = fmt.Errorf("netns %q still routes %s/32: %s", netns, ip, r)
			}
			if err != nil {
				return err
			}
		}
		return nodebed.RoutedAcross(n2.Netns(), ip)
	})
}

// across is a StatefulSet member db-0 on the first node under anyNode,
// both nodes opted in, a client probing its address from the first node
// and one on the second node (the second node's first pod of the pool,
// which claims a block of its own).
type across struct {
	n2                 *nodebed.Node2
	ns                 string
	cidr               *net.IPNet
	old, probe, dialer *corev1.Pod
}

func memberOnTheFirstNode(t *testing.T, namespace string) across {
	t.Helper()
	n2 := bed.StartNode2(t)
	n2.WaitAgent(t)
	anyNode(t)
	pool, cidr := bed.NewPool(t, 25) // two blocks of 64: one per node
	ns := bed.Namespace(t, namespace, pool, true)
	bed.OptIn(t)
	n2.OptIn(t)

	cordon(t, n2.Name)
	bed.EchoStatefulSet(t, ns, "db", 1, nodebed.Echo{})
	old := bed.WaitRunning(t, ns, "app=db", 1)["db-0"]
	if old.Spec.NodeName != bed.NodeName {
		t.Fatalf("db-0 runs on %s, want %s", old.Spec.NodeName, bed.NodeName)
	}
	uncordon(t, n2.Name)
	probe := bed.EchoClientOn(t, ns, "probe", bed.NodeName, nodebed.EchoAddr(old))
	dialer := bed.EchoClientOn(t, ns, "dialer", n2.Name, "")
	answered(t, ns, probe.Name, old, time.Time{})
	return across{n2: n2, ns: ns, cidr: cidr, old: old, probe: probe, dialer: dialer}
}

// cordon marks node unschedulable until uncordon or the test's end.
func cordon(t *testing.T, node string) {
	t.Helper()
	if _, err := bed.Kubectl(context.Background(), "cordon", node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uncordon(t, node) })
}

func uncordon(t *testing.T, node string) {
	t.Helper()
	if _, err := bed.Kubectl(context.Background(), "uncordon", node); err != nil {
		t.Error(err)
	}
}

// anyNode sets returnAddress: anyNode in capo's ConfigMap until the test
// ends, and waits until the first node's agent has reloaded it (the agents
// watch the ConfigMap).
func anyNode(t *testing.T) {
	t.Helper()
	reloads := agentMetric(t, "capo_agent_config_reloads_total")
	setConfig(t, `returnAddress: "sameNode"`, `returnAddress: "anyNode"`)
	nodebed.Eventually(t, 30*time.Second, "the agents to reload their config", func() error {
		if agentMetric(t, "capo_agent_config_reloads_total") <= reloads {
			return fmt.Errorf("no reload yet")
		}
		return nil
	})
}
