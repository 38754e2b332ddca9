package capoctl

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/returns"
	"github.com/capo-net/capo/pkg/selection"
)

func brokerPod(node string, ann map[string]string) *corev1.Pod {
	yes := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "kafka", Name: "broker-2", UID: "pod-new", Annotations: ann,
			Labels:          map[string]string{"statefulset.kubernetes.io/pod-name": "broker-2"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "broker", UID: types.UID("set-1"), Controller: &yes}},
		},
		Spec: corev1.PodSpec{NodeName: node},
	}
}

func TestExplainSaysWhetherTheAddressComesBack(t *testing.T) {
	cases := []struct {
		name   string
		pod    *corev1.Pod
		heldOn string // node of the reservation
		want   string
	}{
		{"same node", brokerPod("worker-3", nil), "worker-3", "address back on return: yes, 10.42.7.19 (returnAddress sameNode)"},
		{"other node", brokerPod("worker-3", nil), "worker-5", "no (10.42.7.19 is held for node worker-5 and returnAddress is sameNode)"},
		{"opted out", brokerPod("worker-3", map[string]string{returns.PodAnnotation: returns.Disabled}), "worker-3", "no (pod annotation capo.io/return-address=disabled)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-3", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kafka", Labels: map[string]string{selection.NamespaceLabel: selection.Enabled}}}
			c := newCtl(t, node, ns, tc.pod)
			e := entry("10.42.7.19", "broker-2", 10*time.Minute)
			e.OwnerUID = "set-1"
			c.reserve(tc.heldOn, e)
			code, out, errw := c.run("", "explain", "kafka/broker-2")
			if code != 0 || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want %q in\n%s%s", code, tc.want, out, errw)
			}
		})
	}
}

// Under anyNode explain says the address also comes back from the
// member's predecessor on a lost node.
func TestExplainAnyNodeSaysAboutALostNode(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-3", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kafka", Labels: map[string]string{selection.NamespaceLabel: selection.Enabled}}}
	c := newCtl(t, node, ns, brokerPod("worker-3", nil))
	cm, err := c.kube.CoreV1().ConfigMaps("capo-system").Get(context.Background(), "capo-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[config.ConfigMapKey] += "returnAddress: anyNode\n"
	if _, err := c.kube.CoreV1().ConfigMaps("capo-system").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := entry("10.42.7.19", "broker-2", 10*time.Minute)
	e.OwnerUID = "set-1"
	c.reserve("worker-5", e)
	code, out, errw := c.run("", "explain", "kafka/broker-2")
	if code != 0 || !strings.Contains(out, "yes, 10.42.7.19 (returnAddress anyNode)") || !strings.Contains(out, "declared lost") || !strings.Contains(out, "AddressReclaimed") {
		t.Fatalf("exit %d\n%s%s", code, out, errw)
	}
}

func TestExplainNothingHeldForANewSet(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-3", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kafka", Labels: map[string]string{selection.NamespaceLabel: selection.Enabled}}}
	c := newCtl(t, node, ns, brokerPod("worker-3", nil))
	e := entry("10.42.7.19", "broker-2", 10*time.Minute)
	e.OwnerUID = "set-0" // the set this address was held under is gone
	c.reserve("worker-3", e)
	if code, out, _ := c.run("", "explain", "kafka/broker-2"); code != 0 || !strings.Contains(out, "address back on return: nothing held for this pod's identity") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestListShowsReturns(t *testing.T) {
	ev := func(name, reason, msg string, age time.Duration) *corev1.Event {
		return &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: name}, Reason: reason, Message: msg,
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "kafka", Name: "broker-2"},
			Source:         corev1.EventSource{Component: "capo-agent", Host: "worker-3"}, LastTimestamp: metav1.NewTime(now.Add(-age)),
		}
	}
	c := newCtl(t,
		ev("a", eventNotReturned, "capo holds 10.42.7.19 for this pod but did not give it back: 10.42.7.19 is allocated to pod kafka/x", 5*time.Minute),
		ev("b", eventReturned, "capo gave this pod back 10.42.7.19", time.Minute),
		ev("c", "IPReservationReleased", "capo released the reservation of 10.42.7.20 (ttl)", time.Minute),
		ev("d", eventReclaimed, "capo freed 10.42.7.19 from this member's earlier sandbox 0123 on node worker-5", 2*time.Minute))
	code, out, _ := c.run("", "list")
	if code != 0 || !strings.Contains(out, "kafka/broker-2  returned      1m0s  capo gave this pod back 10.42.7.19") ||
		!strings.Contains(out, "kafka/broker-2  not returned  5m0s") || !strings.Contains(out, "kafka/broker-2  reclaimed     2m0s  capo freed") || strings.Contains(out, "10.42.7.20") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if strings.Index(out, "not returned") > strings.Index(out, "  returned") {
		t.Fatalf("not oldest first:\n%s", out)
	}
	if code, out, _ := c.run("", "list", "--node", "worker-5"); code != 0 || strings.Contains(out, "Returns") {
		t.Fatalf("--node worker-5 shows worker-3's returns:\n%s", out)
	}
}

func TestReturnsForScripts(t *testing.T) {
	c := newCtl(t, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "a"}, Reason: eventReturned, Message: "capo gave this pod back 10.42.7.19",
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "kafka", Name: "broker-2"},
		Source:         corev1.EventSource{Component: "capo-agent", Host: "worker-3"}, LastTimestamp: metav1.NewTime(now.Add(-time.Minute)),
	})
	code, out, _ := c.run("", "returns", "-o", "json")
	var got []returnEvent
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("exit %d, %v\n%s", code, err, out)
	}
	if len(got) != 1 || got[0].Pod != "kafka/broker-2" || got[0].Reason != eventReturned || !got[0].At.Equal(now.Add(-time.Minute)) {
		t.Fatalf("returns -o json = %+v", got)
	}
	if code, out, _ := c.run("", "returns", "--pod", "kafka/other", "-o", "json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("another pod's returns: exit %d\n%s", code, out)
	}
	if code, out, _ := c.run("", "returns", "-o", "yaml"); code != 0 || !strings.Contains(out, "pod: kafka/broker-2") {
		t.Fatalf("returns -o yaml: exit %d\n%s", code, out)
	}
	if code, out, _ := c.run("", "returns", "--node", "worker-5"); code != 0 || !strings.Contains(out, "(no returns recorded)") {
		t.Fatalf("returns on another node: exit %d\n%s", code, out)
	}
}
