package node

import (
	"context"
	"fmt"
	"os"
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
// the lost node while Calico still has it allocated. Calico's own GC (real
// kube-controllers, 10 s leak grace) keeps that allocation while a pod of
// the member's name exists unscheduled, and frees it only once the
// successor is scheduled on another node: the successor's ADD comes first,
// so even under returnAddress anyNode it gets a fresh address (the old one
// is still allocated), and the old address, once Calico frees it, stays
// reserved. A client that probed the old address all along never got an
// answer from any other pod.
func TestNodeDiesAddressStaysReserved(t *testing.T) {
	if os.Getenv("CAPO_NODE_FULL") == "" {
		t.Skip("a node's death takes two minutes (NotReady, Calico's GC): run by make test-node, not by CI's make e2e")
	}
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
	nodebed.Eventually(t, 30*time.Second, "capo-controller's reservation for the lost pod", func() error {
		reserved, err := bed.Reserved(ctx)
		if err == nil && !reserved[ip] {
			err = fmt.Errorf("%s not reserved", ip)
		}
		return err
	})

	uncordon(t, bed.NodeName)
	var now *corev1.Pod
	nodebed.Eventually(t, 2*time.Minute, "the new db-0 running on "+bed.NodeName, func() error {
		now = bed.Pod(ns, old.Name)
		if now == nil || now.UID == old.UID || now.Status.Phase != corev1.PodRunning || now.Status.PodIP == "" {
			return fmt.Errorf("no running successor yet")
		}
		return nil
	})
	if now.Spec.NodeName != bed.NodeName {
		t.Fatalf("db-0 came back on %s, want %s", now.Spec.NodeName, bed.NodeName)
	}
	t.Logf("the successor got %s (the lost member had %s)", now.Status.PodIP, ip)
	reaches(t, ns, probe.Name, now, cidr)
	nodebed.Eventually(t, 2*time.Minute, "Calico's GC to free the lost member's allocation", func() error {
		allocs, err := bed.Allocations(ctx, cidr)
		if err != nil {
			return err
		}
		if a, ok := allocs[ip]; ok && a.Pod == old.Name && a.Handle == "k8s-pod-network."+old.Annotations["cni.projectcalico.org/containerID"] {
			return fmt.Errorf("%s still allocated to the lost sandbox", ip)
		}
		return nil
	})
	if now.Status.PodIP != ip {
		reserved, err := bed.Reserved(ctx)
		if err != nil {
			t.Fatal(err)
		}
		allocs, err := bed.Allocations(ctx, cidr)
		if err != nil {
			t.Fatal(err)
		}
		if a, ok := allocs[ip]; ok || !reserved[ip] {
			t.Fatalf("%s after Calico's GC: allocated %+v, reserved %v; want free in IPAM and reserved", ip, a, reserved[ip])
		}
	}
	onlyMember(t, ns, probe.Name, old.Name)
}
