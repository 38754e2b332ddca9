package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/nodebed"
)

// The two ways Kubernetes gives up on a dead node's pods, after it went
// NotReady.

// deleteLostNode deletes the Node, as a cloud provider's node controller
// does for a machine that is gone; the pod GC deletes its pods.
func deleteLostNode(t *testing.T, n2 *nodebed.Node2, ns string, old *corev1.Pod) {
	if err := bed.Kube.CoreV1().Nodes().Delete(context.Background(), n2.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	podGone(t, ns, old, 2*time.Minute, "the pod GC")
}

// evictThenOutOfService keeps the Node. The node lifecycle controller
// taints it unreachable and the taint eviction deletes the member (it
// tolerates that for 5 s), but with its kubelet dead the pod stays
// Terminating, and the StatefulSet does not replace a pod that still
// exists. The operator then declares the node shut down (Kubernetes'
// non-graceful node shutdown: the out-of-service taint), and the pod GC
// force-deletes the pod. The Node, taints and all, is deleted when the
// second node is stopped after the test.
func evictThenOutOfService(t *testing.T, n2 *nodebed.Node2, ns string, old *corev1.Pod) {
	ctx := context.Background()
	start := time.Now()
	evicted := taintEvicted(t, ns, old)
	t.Logf("the taint eviction deleted %s %s after NotReady; %s's taints: %s", old.Name, time.Since(start).Round(time.Second), n2.Name, taintsOf(t, n2.Name))
	time.Sleep(time.Until(evicted.DeletionTimestamp.Add(2 * time.Second)))
	if p := bed.Pod(ns, old.Name); p == nil || p.UID != old.UID || p.DeletionTimestamp == nil {
		t.Fatalf("%s (uid %s) not Terminating past its grace period: %+v", old.Name, old.UID, p)
	}
	t.Logf("%s still Terminating 2 s past its grace period, not replaced", old.Name)

	taint := corev1.TaintNodeOutOfService + "=nodeshutdown:NoExecute"
	if _, err := bed.Kubectl(ctx, "taint", "node", n2.Name, taint); err != nil {
		t.Fatal(err)
	}
	tainted := time.Now()
	podGone(t, ns, old, time.Minute, "the pod GC (out-of-service)")
	// kubectl taint puts the new taint first: returns.NodeDeclaredDead, which takes
	// the first of the two, then says out-of-service.
	t.Logf("the pod GC force-deleted %s %s after the out-of-service taint; taints: %s", old.Name, time.Since(tainted).Round(time.Second), taintsOf(t, n2.Name))
}

// taintEvicted waits until the taint eviction has deleted old's pod and
// returns it, Terminating.
func taintEvicted(t *testing.T, ns string, old *corev1.Pod) *corev1.Pod {
	var p *corev1.Pod
	nodebed.Eventually(t, 2*time.Minute, "the taint eviction of "+old.Name, func() error {
		var err error
		p, err = bed.Kube.CoreV1().Pods(ns).Get(context.Background(), old.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			p = nil
			return nil // checked below: stop waiting
		case err != nil:
			return err
		case p.UID != old.UID:
			return nil
		case p.DeletionTimestamp == nil:
			return fmt.Errorf("%s not deleted yet", old.Name)
		}
		return nil
	})
	if p == nil || p.UID != old.UID {
		t.Fatalf("%s (uid %s) gone before the pod GC could see it Terminating: %+v", old.Name, old.UID, p)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Reason == "DeletionByTaintManager" {
			return p
		}
	}
	t.Fatalf("%s deleted, but not by the taint eviction: conditions %+v", old.Name, p.Status.Conditions)
	return nil
}

func taintsOf(t *testing.T, node string) string {
	nd, err := bed.Kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, tn := range nd.Spec.Taints {
		s = append(s, tn.ToString())
	}
	return fmt.Sprint(s)
}

// unreachableFor tolerates an unreachable node for seconds, instead of the
// API server's default 300.
func unreachableFor(seconds int64) corev1.Toleration {
	return corev1.Toleration{
		Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds,
	}
}
