package caliconode

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/selection"
)

func calicoNodePod(name string, initialized bool, deleting bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "calico-system", Labels: map[string]string{"k8s-app": "calico-node"}}}
	status := corev1.ConditionFalse
	if initialized {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: status}}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	return p
}

func running(name, ip string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "db", Annotations: map[string]string{selection.PodAnnotation: selection.Enabled}}}
	p.Status.Phase, p.Status.PodIPs = corev1.PodRunning, []corev1.PodIP{{IP: ip}}
	return p
}

// The window opens with calico-node's old pod terminating, stays open
// while it is gone (whether or not its deletion's handler has run yet) and
// its successor is not initialized, and closes after.
func TestWindow(t *testing.T) {
	now := time.Now()
	var pods []*corev1.Pod
	w := &Window{Selector: labels.SelectorFromSet(labels.Set{"k8s-app": "calico-node"}), Pods: func() []*corev1.Pod { return pods }, Now: func() time.Time { return now }}
	for _, tc := range []struct {
		name  string
		pods  []*corev1.Pod
		gone  bool
		after time.Duration
		open  bool
	}{
		{"running, initialized", []*corev1.Pod{calicoNodePod("a", true, false), running("db-0", "10.0.0.1")}, false, 0, false},
		{"terminating", []*corev1.Pod{calicoNodePod("a", true, true)}, false, 0, true},
		{"deleted, no successor yet", nil, true, 0, true},
		{"successor created, install-cni to run", []*corev1.Pod{calicoNodePod("b", false, false)}, false, 0, true},
		{"successor initialized", []*corev1.Pod{calicoNodePod("b", true, false)}, false, 0, false},
		// The cache drops a deleted pod before its handler is told: a look
		// in between still finds the window open.
		{"deleted again, its handler yet to tell", nil, false, 0, true},
		{"its handler tells", nil, true, time.Second, true},
		{"its grace later, none since", nil, false, SuccessorGrace, false},
	} {
		pods, now = tc.pods, now.Add(tc.after)
		if tc.gone {
			w.Deleted()
		}
		if open, why := w.Open(); open != tc.open {
			t.Fatalf("%s: open %v (%s), want %v", tc.name, open, why, tc.open)
		}
	}
}

// The holds are the selected pods' addresses, the running apart from the
// going, on an opted-in node only; the host's are never held.
func TestHoldEntries(t *testing.T) {
	optedIn := &selection.Object{Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}
	enabled := &selection.Object{Labels: map[string]string{selection.NamespaceLabel: selection.Enabled}}
	ns := func(string) *selection.Object { return enabled }
	going := running("db-1", "10.0.0.2")
	going.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	host := running("db-2", "192.0.2.1")
	host.Spec.HostNetwork = true
	off := running("web", "10.0.0.9")
	off.Annotations[selection.PodAnnotation] = selection.Disabled
	pods := []*corev1.Pod{running("db-0", "10.0.0.1"), going, host, off}
	sandboxOf := func(p *corev1.Pod, ip string) string { return "sb-" + p.Name }
	run, gone := HoldEntries(Selection{Node: optedIn, Namespace: ns}, pods, sandboxOf, time.Now())
	if len(run) != 1 || run[0].IP != "10.0.0.1" || run[0].Reason != reserve.ReasonCNIRewrite || run[0].Sandbox != "sb-db-0" {
		t.Fatalf("running holds %+v, want db-0's 10.0.0.1 in sandbox sb-db-0", run)
	}
	if len(gone) != 1 || gone[0].IP != "10.0.0.2" {
		t.Fatalf("going holds %+v, want db-1's 10.0.0.2", gone)
	}
	if run, gone := HoldEntries(Selection{Node: &selection.Object{}, Namespace: ns}, pods, sandboxOf, time.Now()); len(run)+len(gone) != 0 {
		t.Fatalf("a node not opted in: holds %+v %+v", run, gone)
	}
}

// Calico's annotations name the sandbox of an address they list, in
// either annotation, however the address is spelled.
func TestSandbox(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		ContainerIDAnnotation: "0123456789abcdef0123", PodIPsAnnotation: "10.0.0.1/32,fd00::1/128", PodIPAnnotation: "10.0.0.1/32",
	}}}
	for ip, want := range map[string]string{"10.0.0.1": "0123456789abcdef", "fd00::1": "0123456789abcdef", "::ffff:10.0.0.1": "0123456789abcdef", "10.0.0.2": ""} {
		if got := Sandbox(p, netip.MustParseAddr(ip)); got != want {
			t.Fatalf("Sandbox(%s) = %q, want %q", ip, got, want)
		}
	}
}
