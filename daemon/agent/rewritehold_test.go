package agent

import (
	"context"
	"testing"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

func calicoNodePod(name string, initialized bool, deleting bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "calico-system", UID: types.UID("uid-" + name), Labels: map[string]string{"k8s-app": "calico-node"}}}
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

// member is a running pod of ns db with ip, selected by its annotation.
func member(name, ip string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "db", UID: types.UID("uid-" + name), Annotations: map[string]string{selection.PodAnnotation: selection.Enabled}}}
	p.Status.Phase, p.Status.PodIPs = corev1.PodRunning, []corev1.PodIP{{IP: ip}}
	return p
}

// holders is Calico IPAM as the hold reads it: address -> handle, of pod
// "db/<pod>".
type holders map[string][2]string

func (h holders) GetAssignmentAttributes(_ context.Context, ip cnet.IP) (map[string]string, *string, error) {
	a, ok := h[ip.String()]
	if !ok {
		return nil, nil, cerrors.ErrorResourceDoesNotExist{Identifier: ip.String()}
	}
	return map[string]string{"namespace": "db", "pod": a[1]}, &a[0], nil
}

// The window opens with calico-node's old pod terminating, stays open
// while it is gone and its successor is not initialized, and closes after.
func TestRewriteWindow(t *testing.T) {
	now := time.Now()
	var pods []*corev1.Pod
	w := &rewriteWindow{selector: labels.SelectorFromSet(labels.Set{"k8s-app": "calico-node"}), pods: func() []*corev1.Pod { return pods }, now: func() time.Time { return now }}
	for _, tc := range []struct {
		name  string
		pods  []*corev1.Pod
		gone  bool
		after time.Duration
		open  bool
	}{
		{"running, initialized", []*corev1.Pod{calicoNodePod("a", true, false), member("db-0", "10.0.0.1")}, false, 0, false},
		{"terminating", []*corev1.Pod{calicoNodePod("a", true, true)}, false, 0, true},
		{"deleted, no successor yet", nil, true, 0, true},
		{"successor created, install-cni to run", []*corev1.Pod{calicoNodePod("b", false, false)}, false, 0, true},
		{"successor initialized", []*corev1.Pod{calicoNodePod("b", true, false)}, false, 0, false},
		{"deleted again, no successor yet", nil, true, 0, true},
		{"its grace later, none since", nil, false, successorGrace, false},
	} {
		pods, now = tc.pods, now.Add(tc.after)
		if tc.gone {
			w.deleted()
		}
		if open, why := w.open(); open != tc.open {
			t.Fatalf("%s: open %v (%s), want %v", tc.name, open, why, tc.open)
		}
	}
}

// While calico-node is replaced the selected running pods' addresses are
// held; once its successor is initialized and capo is back in the chain,
// the holds still in use go, the one whose pod was torn down meanwhile
// stays, and so does one a teardown through capo-ipam reserved meanwhile.
func TestRewriteHoldHoldsThenLetsGo(t *testing.T) {
	ctx := context.Background()
	store := reservetest.NewStore(reserve.DefaultLimits)
	db0, db1, db2 := member("db-0", "10.0.0.1"), member("db-1", "10.0.0.2"), member("db-2", "10.0.0.3")
	web := member("web", "10.0.0.9")
	delete(web.Annotations, selection.PodAnnotation)
	host := member("db-host", "192.168.1.1") // selected, on the host's network
	host.Spec.HostNetwork = true
	pods := []*corev1.Pod{calicoNodePod("old", true, true), db0, db1, db2, web, host}
	ipam := holders{"10.0.0.1": {"k8s-pod-network.c0", "db-0"}, "10.0.0.2": {"k8s-pod-network.c1", "db-1"}, "10.0.0.3": {"k8s-pod-network.c2", "db-2"}}
	inChain := false
	optedIn := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	m := newMetrics()
	h := &rewriteHold{
		node: "n1", window: &rewriteWindow{selector: labels.SelectorFromSet(labels.Set{"k8s-app": "calico-node"}), pods: func() []*corev1.Pod { return pods }, now: time.Now},
		cluster: &fakeCluster{node: optedIn}, cachedPod: func(_, name string) *corev1.Pod { return map[string]*corev1.Pod{"db-0": db0}[name] },
		selectors: func() []selection.Selector { return nil }, reserve: storeReserver{store}, store: store, ipam: ipam,
		records: func() ([]*journal.AddrRecord, error) {
			return []*journal.AddrRecord{{Network: "k8s-pod-network", ContainerID: "c1", Pod: wire.PodRef{Namespace: "db", Name: "db-1", UID: "uid-db-1"}, IPs: []string{"10.0.0.2"}}}, nil
		},
		installed: func() bool { return inChain }, guard: &addrGuard{}, held: func([]reserve.Entry) {}, metrics: m,
		timeout: func() time.Duration { return time.Second }, now: time.Now,
	}
	h.setLetting(true)
	h.step(ctx)
	held := holdsOn(t, store)
	for ip, sandbox := range map[string]string{"10.0.0.1": "", "10.0.0.2": "c1", "10.0.0.3": ""} {
		if e, ok := held[ip]; !ok || e.Reason != reserve.ReasonCNIRewrite || e.Sandbox != sandbox || e.OwnerKind != "" && e.PodUID == "" {
			t.Fatalf("%s held as %+v (%v), want a hold naming sandbox %q", ip, e, ok, sandbox)
		}
	}
	if _, ok := held["10.0.0.9"]; ok || len(held) != 3 {
		t.Fatalf("held %v: only the selected pods' own addresses", held)
	}

	// In the window: db-1 torn down by plain calico-ipam (its address
	// freed), db-2's teardown decided through capo-ipam (its release next).
	delete(ipam, "10.0.0.2")
	h.teardown([]reserve.Entry{{IP: "10.0.0.3"}})
	pods = []*corev1.Pod{calicoNodePod("new", true, false), db0, db2, web}
	h.step(ctx)
	if n := len(holdsOn(t, store)); n != 3 {
		t.Fatalf("%d held before capo is back in the chain, want 3", n)
	}
	inChain = true
	h.step(ctx)
	left := holdsOn(t, store)
	if _, ok := left["10.0.0.1"]; ok || len(left) != 2 {
		t.Fatalf("left %v: want db-0's hold let go, db-1's (torn down) and db-2's (reserved by its teardown) kept", left)
	}
	if r, k := testutil.ToFloat64(m.rewriteHolds.WithLabelValues("released")), testutil.ToFloat64(m.rewriteHolds.WithLabelValues("kept")); r != 1 || k != 2 {
		t.Fatalf("released %v, kept %v", r, k)
	}
	if h.isLetting() {
		t.Fatal("still letting go after a let-go that read everything")
	}
}

func holdsOn(t *testing.T, s reserve.Store) map[string]reserve.Entry {
	t.Helper()
	es, err := s.ListNode(context.Background(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]reserve.Entry{}
	for _, e := range es {
		out[e.IP] = e
	}
	return out
}
