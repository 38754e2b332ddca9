package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/caliconode"
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
	// Going: evicted, its teardown yet to run (its sandbox still has the
	// address); and deleted, its teardown done (its address freed).
	evicted, gone := member("db-3", "10.0.0.4"), member("db-4", "10.0.0.5")
	evicted.Status.Phase, gone.DeletionTimestamp = corev1.PodFailed, &metav1.Time{Time: time.Now()}
	pods := []*corev1.Pod{calicoNodePod("old", true, true), db0, db1, db2, web, host, evicted, gone}
	ipam := holders{"10.0.0.1": {"k8s-pod-network.c0", "db-0"}, "10.0.0.2": {"k8s-pod-network.c1", "db-1"}, "10.0.0.3": {"k8s-pod-network.c2", "db-2"}, "10.0.0.4": {"k8s-pod-network.c3", "db-3"}}
	inChain := false
	optedIn := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	m := newMetrics()
	h := &rewriteHold{
		node: "n1", window: &caliconode.Window{Selector: labels.SelectorFromSet(labels.Set{"k8s-app": "calico-node"}), Pods: func() []*corev1.Pod { return pods }, Now: time.Now},
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
	for ip, sandbox := range map[string]string{"10.0.0.1": "", "10.0.0.2": "c1", "10.0.0.3": "", "10.0.0.4": ""} {
		if e, ok := held[ip]; !ok || e.Reason != reserve.ReasonCNIRewrite || e.Sandbox != sandbox || e.OwnerKind != "" && e.PodUID == "" {
			t.Fatalf("%s held as %+v (%v), want a hold naming sandbox %q", ip, e, ok, sandbox)
		}
	}
	if _, ok := held["10.0.0.9"]; ok || len(held) != 4 {
		t.Fatalf("held %v: only the selected pods' own addresses, an ended pod's while its sandbox has it", held)
	}
	delete(held, "10.0.0.4") // its teardown goes through the rewritten conflist
	delete(ipam, "10.0.0.4")
	if err := releaseAll(store, "10.0.0.4"); err != nil {
		t.Fatal(err)
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

// releaseAll ends every reservation of ip on n1.
func releaseAll(s reserve.Store, ip string) error {
	es, err := s.ListNode(context.Background(), "n1")
	if err != nil {
		return err
	}
	var refs []reserve.Ref
	for _, e := range es {
		if e.IP == ip {
			refs = append(refs, e.Ref())
		}
	}
	_, err = s.Release(context.Background(), refs)
	return err
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

// The holds go on after calico-node's successor is initialized until capo
// is back in the chain: one that could not be written in the window (the
// API away) is written then, and so is a pod's started meanwhile. An agent
// that starts where capo is not in the chain, with no calico-node
// replaced, holds nothing for it.
func TestRewriteHoldHoldsUntilCapoIsBack(t *testing.T) {
	ctx := context.Background()
	store := reservetest.NewStore(reserve.DefaultLimits)
	db0, db5 := member("db-0", "10.0.0.1"), member("db-5", "10.0.0.6")
	pods := []*corev1.Pod{calicoNodePod("old", true, false), db0}
	ipam := holders{"10.0.0.1": {"k8s-pod-network.c0", "db-0"}, "10.0.0.6": {"k8s-pod-network.c5", "db-5"}}
	inChain := false
	refused := errors.New("the API is away")
	var reserveErr error
	optedIn := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	h := &rewriteHold{
		node: "n1", window: &caliconode.Window{Selector: labels.SelectorFromSet(labels.Set{"k8s-app": "calico-node"}), Pods: func() []*corev1.Pod { return pods }, Now: time.Now},
		cluster: &fakeCluster{node: optedIn}, cachedPod: func(_, name string) *corev1.Pod { return map[string]*corev1.Pod{"db-0": db0, "db-5": db5}[name] },
		selectors: func() []selection.Selector { return nil }, store: store, ipam: ipam,
		reserve: reserverFunc(func(ctx context.Context, es []reserve.Entry) (*reserve.Result, error) {
			if reserveErr != nil {
				return nil, reserveErr
			}
			return store.Reserve(ctx, "n1", es)
		}),
		records:   func() ([]*journal.AddrRecord, error) { return nil, nil },
		installed: func() bool { return inChain }, guard: &addrGuard{}, held: func([]reserve.Entry) {}, metrics: newMetrics(),
		timeout: func() time.Duration { return time.Second }, now: time.Now,
	}
	h.setLetting(true) // as the agent starts
	h.step(ctx)
	if n := len(holdsOn(t, store)); n != 0 {
		t.Fatalf("%d held with calico-node running and capo not in the chain, no replacement seen", n)
	}

	pods[0] = calicoNodePod("old", true, true)
	reserveErr = refused
	h.step(ctx)
	if n := len(holdsOn(t, store)); n != 0 {
		t.Fatalf("%d held while the writes are refused", n)
	}
	// The successor initialized, a member started, capo not back yet.
	pods = []*corev1.Pod{calicoNodePod("new", true, false), db0, db5}
	reserveErr = nil
	h.step(ctx)
	if held := holdsOn(t, store); len(held) != 2 || held["10.0.0.1"].Reason != reserve.ReasonCNIRewrite || held["10.0.0.6"].Reason != reserve.ReasonCNIRewrite {
		t.Fatalf("held %v after the successor ran with capo not back: want db-0's and db-5's", held)
	}
	inChain = true
	h.step(ctx)
	if held := holdsOn(t, store); len(held) != 0 || h.isLetting() {
		t.Fatalf("left %v once capo is back (letting go: %v)", held, h.isLetting())
	}
	inChain = false // capo out of the chain again, calico-node not replaced: nothing held
	h.step(ctx)
	if n := len(holdsOn(t, store)); n != 0 {
		t.Fatalf("%d held after the let-go with no replacement", n)
	}
}

type reserverFunc func(context.Context, []reserve.Entry) (*reserve.Result, error)

func (f reserverFunc) Reserve(ctx context.Context, es []reserve.Entry) (*reserve.Result, error) {
	return f(ctx, es)
}
