package node

import (
	"context"
	"fmt"
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
// Node goes NotReady; its Node object is then deleted, as a cloud
// provider's node controller does for a machine that is gone, and the pod
// GC deletes its pods. capo-controller reserves the member's address for
// the lost node while Calico still has it allocated: Calico's own GC (real
// kube-controllers, 10 s leak grace) keeps that allocation while a pod of
// the member's name exists unscheduled, so the successor's ADD comes
// first. Under returnAddress anyNode capo-ipam frees the allocation the
// way the lost node's runtime would have (calico-ipam's DEL of the old
// sandbox) and asks for the address: the successor comes back on the
// first node with its own address and answers there, the reservation
// ends once it is up, and the address was never free and unreserved. A
// client that probed the old address all along never got an answer from
// any other pod.
func TestNodeDiesAddressStaysReserved(t *testing.T) {
	ctx := context.Background()
	n2 := bed.StartNode2(t)
	n2.WaitAgent(t)
	anyNode(t)
	pool, cidr := bed.NewPool(t, 25)
	ns := bed.Namespace(t, "node-dies", pool, true)
	bed.OptIn(t)
	n2.OptIn(t)
	bed.StartKubeControllers(t, testbed.Kubernetes, 10*time.Second)

	cordon(t, bed.NodeName)
	bed.EchoStatefulSet(t, ns, "db", 1, nodebed.Echo{})
	old := bed.WaitRunning(t, ns, "app=db", 1)["db-0"]
	if old.Spec.NodeName != n2.Name {
		t.Fatalf("db-0 runs on %s, want %s", old.Spec.NodeName, n2.Name)
	}
	ip := old.Status.PodIP
	probe := bed.EchoClientOn(t, ns, "probe", bed.NodeName, nodebed.EchoAddr(old))
	answered(t, ns, probe.Name, old, time.Time{})
	guard := guardAddresses(t, ns, cidr, map[string]*corev1.Pod{old.Name: old}, n2.StateDir())
	reclaims := agentMetric(t, returnsMetric, `outcome="reclaimed"`, `reason="node-gone"`)

	died := time.Now()
	if err := n2.Die(); err != nil {
		t.Fatal(err)
	}
	nodebed.Eventually(t, 2*time.Minute, n2.Name+" NotReady", func() error {
		nd, err := bed.Kube.CoreV1().Nodes().Get(ctx, n2.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range nd.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("%s still Ready", n2.Name)
	})
	t.Logf("%s NotReady %s after it died", n2.Name, time.Since(died).Round(time.Second))
	if err := bed.Kube.CoreV1().Nodes().Delete(ctx, n2.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nodebed.Eventually(t, 2*time.Minute, "the pod GC to delete the lost node's db-0", func() error {
		p, err := bed.Kube.CoreV1().Pods(ns).Get(ctx, old.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != old.UID) {
			return nil
		}
		return fmt.Errorf("db-0 (uid %s) still there (%v)", old.UID, err)
	})
	// capo-controller reserves before Calico's GC could free it: the
	// address is still allocated to the lost sandbox here.
	nodebed.Eventually(t, 30*time.Second, "capo-controller's reservation for the lost pod", func() error {
		reserved, err := bed.Reserved(ctx)
		if err == nil && !reserved[ip] {
			err = fmt.Errorf("%s not reserved", ip)
		}
		return err
	})
	oldHandle := "k8s-pod-network." + old.Annotations["cni.projectcalico.org/containerID"]
	if allocs, err := bed.Allocations(ctx, cidr); err != nil || allocs[ip].Handle != oldHandle {
		t.Fatalf("%s reserved, and allocated to %+v (%v): want still the lost sandbox %s", ip, allocs[ip], err, oldHandle)
	}
	t.Logf("%s reserved %s after %s died, still allocated to its lost sandbox", ip, time.Since(died).Round(time.Second), n2.Name)

	start := time.Now()
	uncordon(t, bed.NodeName)
	now := back(t, ns, old, false)
	if now.Spec.NodeName != bed.NodeName {
		t.Fatalf("db-0 came back on %s, want %s", now.Spec.NodeName, bed.NodeName)
	}
	t.Logf("the successor runs on %s with %s %s after the uncordon", now.Spec.NodeName, now.Status.PodIP, time.Since(start).Round(time.Millisecond))
	nodebed.Eventually(t, 30*time.Second, "the address allocated to the new sandbox and no longer reserved", func() error {
		return bed.AllocatedTo(ctx, cidr, ip, now)
	})
	t.Logf("its reservation ended %s after the uncordon", time.Since(start).Round(time.Millisecond))
	answered(t, ns, probe.Name, now, start)
	reaches(t, ns, probe.Name, now, cidr)
	if got := agentMetric(t, returnsMetric, `outcome="reclaimed"`, `reason="node-gone"`); got != reclaims+1 {
		t.Errorf("the agent counted %v reclaims from a deleted node, want %v", got, reclaims+1)
	}
	reclaimedEvent(t, ns, now, n2.Name)
	if err := guard.stop(); err != nil {
		t.Fatal(err)
	}
	onlyMember(t, ns, probe.Name, old.Name)
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
