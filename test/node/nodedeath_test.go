package node

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/nodebed"
	"github.com/capo-net/capo/test/testbed"
)

// A node that really dies: the second node's kubelet, containerd,
// kube-proxy, felix and pods killed at once, so no CNI DEL ever runs. The
// Node goes NotReady, and Kubernetes then gives up on its pods in one of
// two ways (the subtests). capo-controller reserves the member's address
// for the lost node while Calico still has it allocated: Calico's own GC
// (real kube-controllers, 10 s leak grace) keeps that allocation while a
// pod of the member's name exists unscheduled, so the successor's ADD
// comes first. Under returnAddress anyNode capo-ipam frees the allocation
// the way the lost node's runtime would have (calico-ipam's DEL of the old
// sandbox) and asks for the address: the successor comes back on the
// first node with its own address and answers there, the reservation ends
// once it is up, and the address was never free and unreserved. A client
// that probed the old address all along never got an answer from any
// other pod.
func TestNodeDiesAddressStaysReserved(t *testing.T) {
	for _, l := range []nodeLoss{
		{name: "node-deleted", lose: deleteLostNode, reasons: []string{"node-gone"}},
		{
			name: "out-of-service", lose: evictThenOutOfService,
			reasons: []string{"node-out-of-service"},
			echo:    nodebed.Echo{Tolerations: []corev1.Toleration{unreachableFor(5)}},
		},
	} {
		t.Run(l.name, func(t *testing.T) { nodeDies(t, l) })
	}
}

// nodeLoss is how Kubernetes gives up on the dead node's member.
type nodeLoss struct {
	name string
	echo nodebed.Echo // the member's StatefulSet
	// lose runs once the node is NotReady and returns when the member's
	// pod object is gone.
	lose func(t *testing.T, n2 *nodebed.Node2, ns string, old *corev1.Pod)
	// reasons are the agent's reclaim reasons (returns.NodeDeclaredDead) one of
	// which must count the return.
	reasons []string
}

func nodeDies(t *testing.T, l nodeLoss) {
	d := memberOnDyingNode(t, l.echo)
	reclaims := reclaimCounts(t, l.reasons)
	died := time.Now()
	if err := d.n2.Die(); err != nil {
		t.Fatal(err)
	}
	waitNotReady(t, d.n2.Name)
	t.Logf("%s NotReady %s after it died", d.n2.Name, time.Since(died).Round(time.Second))
	l.lose(t, d.n2, d.ns, d.old)
	d.reservedWhileAllocated(t, died)
	d.comesBackReclaimed(t, l.reasons, reclaims)
}

// dyingMember is the second node, opted in, with the member db-0 on it; a
// client on the first node probing db-0's address, and a guard on it.
type dyingMember struct {
	n2         *nodebed.Node2
	ns         string
	cidr       *net.IPNet
	old, probe *corev1.Pod
	guard      *addressGuard
}

func memberOnDyingNode(t *testing.T, echo nodebed.Echo) *dyingMember {
	n2 := bed.StartNode2(t)
	n2.WaitAgent(t)
	anyNode(t)
	pool, cidr := bed.NewPool(t, 25)
	ns := bed.Namespace(t, "node-dies", pool, true)
	bed.OptIn(t)
	n2.OptIn(t)
	bed.StartKubeControllers(t, testbed.Kubernetes, 10*time.Second)

	cordon(t, bed.NodeName)
	bed.EchoStatefulSet(t, ns, "db", 1, echo)
	old := bed.WaitRunning(t, ns, "app=db", 1)["db-0"]
	if old.Spec.NodeName != n2.Name {
		t.Fatalf("db-0 runs on %s, want %s", old.Spec.NodeName, n2.Name)
	}
	probe := bed.EchoClientOn(t, ns, "probe", bed.NodeName, nodebed.EchoAddr(old))
	answered(t, ns, probe.Name, old, time.Time{})
	guard := guardAddresses(t, ns, cidr, map[string]*corev1.Pod{old.Name: old}, n2.StateDir())
	return &dyingMember{n2: n2, ns: ns, cidr: cidr, old: old, probe: probe, guard: guard}
}

func waitNotReady(t *testing.T, node string) {
	nodebed.Eventually(t, 2*time.Minute, node+" NotReady", func() error {
		nd, err := bed.Kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range nd.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("%s still Ready", node)
	})
}

// reservedWhileAllocated: capo-controller reserves before Calico's GC
// could free the address, which is still allocated to the lost sandbox.
func (d *dyingMember) reservedWhileAllocated(t *testing.T, died time.Time) {
	ctx := context.Background()
	ip := d.old.Status.PodIP
	nodebed.Eventually(t, 30*time.Second, "capo-controller's reservation for the lost pod", func() error {
		reserved, err := bed.Reserved(ctx)
		if err == nil && !reserved[ip] {
			err = fmt.Errorf("%s not reserved", ip)
		}
		return err
	})
	oldHandle := "k8s-pod-network." + d.old.Annotations["cni.projectcalico.org/containerID"]
	if allocs, err := bed.Allocations(ctx, d.cidr); err != nil || allocs[ip].Handle != oldHandle {
		t.Fatalf("%s reserved, and allocated to %+v (%v): want still the lost sandbox %s", ip, allocs[ip], err, oldHandle)
	}
	t.Logf("%s reserved %s after %s died, still allocated to its lost sandbox", ip, time.Since(died).Round(time.Second), d.n2.Name)
}

// comesBackReclaimed lets the successor start on the first node and
// checks it got its own address by a reclaim counted under one of reasons.
func (d *dyingMember) comesBackReclaimed(t *testing.T, reasons []string, before map[string]float64) {
	start := time.Now()
	uncordon(t, bed.NodeName)
	now := back(t, d.ns, d.old, false)
	if now.Spec.NodeName != bed.NodeName {
		t.Fatalf("db-0 came back on %s, want %s", now.Spec.NodeName, bed.NodeName)
	}
	t.Logf("the successor runs on %s with %s %s after the uncordon", now.Spec.NodeName, now.Status.PodIP, time.Since(start).Round(time.Millisecond))
	nodebed.Eventually(t, 30*time.Second, "the address allocated to the new sandbox and no longer reserved", func() error {
		return bed.AllocatedTo(context.Background(), d.cidr, d.old.Status.PodIP, now)
	})
	t.Logf("its reservation ended %s after the uncordon", time.Since(start).Round(time.Millisecond))
	answered(t, d.ns, d.probe.Name, now, start)
	reaches(t, d.ns, d.probe.Name, now, d.cidr)
	var counted []string
	for r, n := range reclaimCounts(t, reasons) {
		if n != before[r] {
			counted = append(counted, fmt.Sprintf("%s +%v", r, n-before[r]))
		}
	}
	if len(counted) != 1 || !strings.HasSuffix(counted[0], " +1") {
		t.Errorf("the agent's reclaims changed by %v, want one more under one of %v", counted, reasons)
	}
	t.Logf("reclaimed: %v", counted)
	reclaimedEvent(t, d.ns, now, d.n2.Name)
	if err := d.guard.stop(); err != nil {
		t.Fatal(err)
	}
	onlyMember(t, d.ns, d.probe.Name, d.old.Name)
}

// reclaimCounts are the first node's agent's reclaims, by reason.
func reclaimCounts(t *testing.T, reasons []string) map[string]float64 {
	out := map[string]float64{}
	for _, r := range reasons {
		out[r] = agentMetric(t, returnsMetric, `outcome="reclaimed"`, `reason="`+r+`"`)
	}
	return out
}

// reclaimedEvent checks the agent's Event on the successor naming the lost
// node its predecessor's allocation was freed from.
func reclaimedEvent(t *testing.T, ns string, pod *corev1.Pod, lost string) {
	t.Helper()
	nodebed.Eventually(t, 10*time.Second, "the AddressReclaimed Event on "+pod.Name, func() error {
		evs, err := bed.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=AddressReclaimed,involvedObject.name=" + pod.Name})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.UID == pod.UID && strings.Contains(e.Message, "on node "+lost) {
				t.Logf("Event %s: %s", e.Reason, e.Message)
				return nil
			}
		}
		return fmt.Errorf("%d AddressReclaimed Events, none for uid %s naming node %s", len(evs.Items), pod.UID, lost)
	})
}

// podGone waits until old's pod object is gone (a successor of its name
// may be there).
func podGone(t *testing.T, ns string, old *corev1.Pod, within time.Duration, by string) {
	nodebed.Eventually(t, within, by+" to delete the lost node's "+old.Name, func() error {
		p, err := bed.Kube.CoreV1().Pods(ns).Get(context.Background(), old.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != old.UID) {
			return nil
		}
		return fmt.Errorf("%s (uid %s) still there (%v)", old.Name, old.UID, err)
	})
}
