package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/reserve"
)

// calicoNode starts n1's calico-node pod, initialized.
func (b *awayBed) calicoNode(name string) {
	b.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: map[string]string{"k8s-app": "calico-node"}},
		Spec:       corev1.PodSpec{NodeName: "n1", HostNetwork: true},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}},
	}
	if _, err := b.kube.CoreV1().Pods("kube-system").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		b.t.Fatal(err)
	}
	waitFor(b.t, "calico-node seen", func() bool { return b.c.caches.pod("kube-system", name) != nil })
}

func (b *awayBed) deleteCalicoNode(name string) {
	b.t.Helper()
	if err := b.kube.CoreV1().Pods("kube-system").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		b.t.Fatal(err)
	}
	waitFor(b.t, "calico-node's deletion seen", func() bool { return b.c.caches.pod("kube-system", name) == nil })
}

// While a node's agent is away and its calico-node pod is replaced, the
// controller holds the node's selected running pods' addresses in the
// agent's place, naming the sandbox that has them; calico-node replaced
// while the agent is ready is the agent's to hold.
func TestCalicoNodeReplacedWithTheAgentAwayIsHeldByTheController(t *testing.T) {
	b := newAwayBed(t)
	b.calicoNode("calico-node-a")
	b.deleteCalicoNode("calico-node-a")
	if e, ok := b.held("10.0.0.5"); ok {
		t.Fatalf("the controller held an address on a node whose agent is ready: %+v", e)
	}
	b.calicoNode("calico-node-b")
	b.agentReady(false)
	b.c.coverer.everyPass()
	if e, ok := b.held("10.0.0.5"); ok {
		t.Fatalf("the controller held an address with calico-node running: %+v", e)
	}
	b.deleteCalicoNode("calico-node-b")
	e, ok := b.held("10.0.0.5")
	if !ok || e.Reason != reserve.ReasonCNIRewrite || e.Pod != "broker-0" || e.PodUID != "u0" || e.Sandbox != "broker-0" || e.OwnerName != "broker" {
		t.Fatalf("hold %+v (held %v), want broker-0's 10.0.0.5 held for its sandbox", e, ok)
	}
}

// A hold is made only on an address Calico still allocates to its pod's
// sandbox: one since freed, or given to another pod, is not held.
func TestTheControllerHoldsOnlyWhatThePodHas(t *testing.T) {
	b := newAwayBed(t)
	b.calicoNode("calico-node-a")
	b.agentReady(false)
	b.ipam.set("10.0.0.5", "kafka", "broker-9")
	b.deleteCalicoNode("calico-node-a")
	if e, ok := b.held("10.0.0.5"); ok {
		t.Fatalf("held an address another pod has: %+v", e)
	}
}
