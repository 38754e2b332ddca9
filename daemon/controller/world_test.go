package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/capo-net/capo/pkg/caliconode"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/returns"
)

func TestNodeDownOrGone(t *testing.T) {
	ready := func(s corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s}}}}
	}
	unreachable := ready(corev1.ConditionTrue)
	unreachable.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}
	// Declared dead by an operator while its last status still says Ready:
	// the same answer as returns.NodeDeclaredDead, whatever the status.
	outOfService := ready(corev1.ConditionTrue)
	outOfService.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}}
	for name, tc := range map[string]struct {
		n    *corev1.Node
		want bool
	}{
		"gone":                {nil, true},
		"ready":               {ready(corev1.ConditionTrue), false},
		"not ready":           {ready(corev1.ConditionFalse), true},
		"unknown":             {ready(corev1.ConditionUnknown), true},
		"no condition yet":    {&corev1.Node{}, true},
		"tainted unreachable": {unreachable, true},
		"out of service":      {outOfService, true},
	} {
		if got := returns.NodeDown(tc.n); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

func TestTrimPodKeepsWhatNodeLossNeeds(t *testing.T) {
	yes := true
	now := metav1.Now()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "zk-0", Namespace: "zk", UID: "u", Labels: map[string]string{"a": "b"},
			Annotations: map[string]string{"c": "d"}, DeletionTimestamp: &now,
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "zk", UID: "s", Controller: &yes}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "big", Image: "x"}}},
		Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}, PodIP: "10.0.0.1"},
	}
	agents, _ := labels.Parse(DefaultAgentSelector)
	calicoNodes, _ := labels.Parse(caliconode.DefaultSelector)
	o, _ := trimPod(agents, calicoNodes)(p)
	got := o.(*corev1.Pod)
	if len(got.Spec.Containers) != 0 || len(got.ManagedFields) != 0 {
		t.Fatal("trimPod kept what it should drop")
	}
	es := podEntries(got, podIPs(got), reserve.ReasonNodeLost, time.Unix(100, 0))
	if len(es) != 2 || es[0].Node != "n1" || es[0].OwnerName != "zk" || es[0].PodUID != "u" || es[0].Reason != reserve.ReasonNodeLost || got.DeletionTimestamp == nil {
		t.Fatalf("entries from the trimmed pod: %+v", es)
	}
}

// A replica that does not lead remembers lost pods for as long as a dead
// leader's last renewal can be behind a takeover, and hands them over once.

// An agent pod keeps its readiness through the trim, and calico-node's
// whether it is initialized; other pods keep none.
func TestTrimPodKeepsAgentReadiness(t *testing.T) {
	agents, _ := labels.Parse(DefaultAgentSelector)
	calicoNodes, _ := labels.Parse(caliconode.DefaultSelector)
	status := corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue, Message: "long text"}}}
	agent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "capo", "app.kubernetes.io/component": "agent"}}, Status: status}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Status: status}
	a, _ := trimPod(agents, calicoNodes)(agent)
	o, _ := trimPod(agents, calicoNodes)(other)
	if !podReady(a.(*corev1.Pod)) || len(a.(*corev1.Pod).Status.Conditions) != 1 || a.(*corev1.Pod).Status.Conditions[0].Message != "" {
		t.Fatalf("agent pod: %+v", a.(*corev1.Pod).Status.Conditions)
	}
	if len(o.(*corev1.Pod).Status.Conditions) != 0 {
		t.Fatalf("other pod kept conditions: %+v", o.(*corev1.Pod).Status.Conditions)
	}
	calicoNode := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "calico-node"}}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodInitialized, Status: corev1.ConditionFalse, Message: "long text"}, {Type: corev1.PodReady, Status: corev1.ConditionFalse},
	}}}
	cn, _ := trimPod(agents, calicoNodes)(calicoNode)
	if c := cn.(*corev1.Pod).Status.Conditions; len(c) != 1 || c[0].Type != corev1.PodInitialized || c[0].Message != "" || caliconode.Initialized(cn.(*corev1.Pod)) {
		t.Fatalf("calico-node pod kept conditions: %+v", c)
	}
	// An ended pod keeps when it stopped being ready: its teardown's date.
	ended := other.DeepCopy()
	ended.Status.Phase = corev1.PodFailed
	ended.Status.Conditions[1] = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Unix(1000, 0), Message: "long text"}
	e, _ := trimPod(agents, calicoNodes)(ended)
	if c := e.(*corev1.Pod).Status.Conditions; len(c) != 1 || !c[0].LastTransitionTime.Equal(&ended.Status.Conditions[1].LastTransitionTime) || c[0].Message != "" {
		t.Fatalf("ended pod kept conditions: %+v", c)
	}
}
