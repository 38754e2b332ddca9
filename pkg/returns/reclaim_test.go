package returns

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
)

func TestNodeDeclaredDead(t *testing.T) {
	taint := func(key string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: key, Effect: corev1.TaintEffectNoExecute}}}}
	}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want Lost
	}{
		{"Node object gone", nil, NodeGone},
		// Unreachable is not dead: a partitioned control plane taints it so
		// while its pods run.
		{"unreachable", taint(corev1.TaintNodeUnreachable), ""},
		{"out of service", taint(corev1.TaintNodeOutOfService), NodeOutOfService},
		{"unreachable, then out of service", &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}, {Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute},
		}}}, NodeOutOfService},
		// NotReady with its kubelet still reporting: it runs its own DELs.
		{"not ready", taint(corev1.TaintNodeNotReady), ""},
		{"healthy", &corev1.Node{}, ""},
	} {
		if got := NodeDeclaredDead(tc.node); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The member's own predecessor on a lost node is freed for it; each
// condition false frees nothing.
func TestReclaim(t *testing.T) {
	pod := setPod("redis-3", "a", nil) // UID pod-uid, on n1
	e := entry("10.0.0.3", "redis-3", "a", 100)
	e.Node, e.PodUID = "n2", "old-uid"
	pred := calico.Holder{Handle: "k8s-pod-network.0123abcd", Namespace: "ns", Pod: "redis-3", Node: "n2"}
	cases := []struct {
		name string
		mode config.ReturnMode
		edit func(h *calico.Holder, e *reserve.Entry, pod *corev1.Pod)
		lost Lost
		want string // "" = reclaimed
	}{
		{"predecessor on a deleted node", config.ReturnAnyNode, nil, NodeGone, ""},
		{"predecessor on an out-of-service node", config.ReturnAnyNode, nil, NodeOutOfService, ""},
		{"sameNode", config.ReturnSameNode, nil, NodeGone, "returnAddress is sameNode"},
		{"off", config.ReturnOff, nil, NodeGone, "returnAddress is off"},
		{"another pod's allocation", config.ReturnAnyNode, func(h *calico.Holder, _ *reserve.Entry, _ *corev1.Pod) { h.Pod = "web-1" }, NodeGone, "allocated to pod ns/web-1"},
		{"another namespace's pod of that name", config.ReturnAnyNode, func(h *calico.Holder, _ *reserve.Entry, _ *corev1.Pod) { h.Namespace = "other" }, NodeGone, "allocated to pod other/redis-3"},
		{"allocated on this node", config.ReturnAnyNode, func(h *calico.Holder, _ *reserve.Entry, _ *corev1.Pod) { h.Node = "n1" }, NodeGone, "not on another node"},
		{"allocation without a node", config.ReturnAnyNode, func(h *calico.Holder, _ *reserve.Entry, _ *corev1.Pod) { h.Node = "" }, NodeGone, "not on another node"},
		{"the same pod (a sandbox re-created)", config.ReturnAnyNode, func(_ *calico.Holder, e *reserve.Entry, _ *corev1.Pod) { e.PodUID = "pod-uid" }, NodeGone, "not a successor"},
		{"reservation without a pod UID", config.ReturnAnyNode, func(_ *calico.Holder, e *reserve.Entry, _ *corev1.Pod) { e.PodUID = "" }, NodeGone, "not a successor"},
		{"node not lost", config.ReturnAnyNode, nil, "", "not lost to Kubernetes"},
		{"another network's handle", config.ReturnAnyNode, func(h *calico.Holder, _ *reserve.Entry, _ *corev1.Pod) { h.Handle = "other-net.0123abcd" }, NodeGone, "cannot name that sandbox"},
		{"a legacy handle", config.ReturnAnyNode, func(h *calico.Holder, _ *reserve.Entry, _ *corev1.Pod) { h.Handle = "ns.redis-3" }, NodeGone, "cannot name that sandbox"},
		{"no container ID", config.ReturnAnyNode, func(h *calico.Holder, _ *reserve.Entry, _ *corev1.Pod) { h.Handle = "k8s-pod-network." }, NodeGone, "cannot name that sandbox"},
		{"a container ID the CNI spec forbids", config.ReturnAnyNode, func(h *calico.Holder, _ *reserve.Entry, _ *corev1.Pod) {
			h.Handle = "k8s-pod-network.a;IP=10.0.0.9"
		}, NodeGone, "cannot name that sandbox"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, e, pod := pred, e, pod.DeepCopy()
			if tc.edit != nil {
				tc.edit(&h, &e, pod)
			}
			got, why := Reclaim(tc.mode, pod, e, "n1", "k8s-pod-network", &h, tc.lost)
			switch {
			case tc.want == "" && (got == nil || *got != Predecessor{Handle: pred.Handle, ContainerID: "0123abcd", Node: "n2", Lost: tc.lost}):
				t.Fatalf("%+v (%s), want the predecessor freed", got, why)
			case tc.want != "" && (got != nil || !strings.Contains(why, tc.want)):
				t.Fatalf("%+v %q, want nothing freed: %q", got, why, tc.want)
			}
		})
	}
	if got, _ := Reclaim(config.ReturnAnyNode, pod, e, "n1", "k8s-pod-network", nil, NodeGone); got != nil {
		t.Fatalf("a free address reclaimed: %+v", got)
	}
	if got, _ := Reclaim(config.ReturnAnyNode, pod, e, "n1", "", &pred, NodeGone); got != nil {
		t.Fatalf("reclaimed for a capo-ipam that named no network: %+v", got)
	}
}
