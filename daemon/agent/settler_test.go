package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
	"github.com/capo-net/capo/pkg/returns/calicoview"
	"github.com/capo-net/capo/pkg/wire"
)

// A teardown that reserves a returned address again before the agent has
// ended its reservation keeps it: the address is about to be freed.
func TestReturnedDoesNotEndAReservationMadeSince(t *testing.T) {
	for _, teardownFirst := range []bool{false, true} {
		ctx := context.Background()
		store := reservetest.NewStore(reserve.DefaultLimits)
		r, pod := returnsHolding(t, store)
		r.s.guard.expect([]string{"10.0.0.3"})
		if teardownFirst {
			r.s.guard.reserving([]string{"10.0.0.3"})() // the DEL's reservation write
		}
		r.s.returned(ctx, pod, reportFor("10.0.0.3"))
		held, err := store.ListNode(ctx, "n1")
		if err != nil {
			t.Fatal(err)
		}
		// Without a teardown since, the return ends the reservation.
		if want := map[bool]int{false: 0, true: 1}[teardownFirst]; len(held) != want {
			t.Fatalf("teardown first %v: %d held, want %d: %v", teardownFirst, len(held), want, held)
		}
	}
}

// The index answers a returning pod's ADD without a read: entries being
// written (no node yet) are this node's, and a pod finds those of its
// name or its UID only.
func TestHeldIndex(t *testing.T) {
	h := newHeldIndex("n1")
	h.add([]reserve.Entry{{IP: "FD00::3", Namespace: "ns", Pod: "redis-3", PodUID: "pod-1", OwnerUID: "set-1"}})
	yes := true
	pod := func(uid, set string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "redis-3", UID: types.UID(uid),
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "redis", UID: types.UID(set), Controller: &yes}},
		}}
	}
	if !h.has(pod("pod-2", "set-1")) || !h.has(pod("pod-1", "set-9")) {
		t.Fatal("identity: the same set's member or the same pod")
	}
	// A member of a set re-created under the name reads the store too: the
	// controller may have handed it the reservation since the index's read.
	if !h.has(pod("pod-2", "set-2")) {
		t.Fatal("a re-created set's member is not looked up")
	}
	other := pod("pod-3", "set-1")
	other.Name = "redis-4"
	if h.has(other) {
		t.Fatal("a pod of another name and UID is indexed")
	}
	if es := h.entries(); len(es) != 1 || es[0].Node != "n1" || es[0].IP != "fd00::3" {
		t.Fatalf("entries %+v", es)
	}
	h.remove([]string{"fd00::3"})
	if h.has(pod("pod-1", "set-1")) {
		t.Fatal("an ended reservation is still indexed")
	}
}

// flakyStore fails its first Release, as a datastore briefly away does.
type flakyStore struct {
	reserve.Store
	fails int
}

func (s *flakyStore) Release(ctx context.Context, refs []reserve.Ref) ([]reserve.Ref, error) {
	if s.fails > 0 {
		s.fails--
		return nil, errors.New("etcdserver: request timed out")
	}
	return s.Store.Release(ctx, refs)
}

// A return's reservation still ends when the datastore fails the first try.
func TestReturnedRetriesTheRelease(t *testing.T) {
	ctx := context.Background()
	store := &flakyStore{Store: reservetest.NewStore(reserve.DefaultLimits), fails: 1}
	r, pod := returnsHolding(t, store)
	r.s.guard.expect([]string{"10.0.0.3"})
	r.s.returned(ctx, pod, reportFor("10.0.0.3"))
	if held, err := store.ListNode(ctx, "n1"); err != nil || len(held) != 0 {
		t.Fatalf("held after the return: %v %v", held, err)
	}
}

// capo-ipam's report of a return is judged on the pod the offer went to
// when the agent can no longer find it (gone from the cache, the API server
// slow): the reservation still ends.
func TestReturnReportForAPodNoLongerFound(t *testing.T) {
	ctx := context.Background()
	store := reservetest.NewStore(reserve.DefaultLimits)
	r, pod := returnsHolding(t, store)
	r.o.offers.remember(pod, []string{"10.0.0.3"}) // as offer does when it answers capo-ipam's ADD
	srv := serverFor(r, &fakeCluster{})
	body := `{"pod":{"namespace":"ns","name":"redis-3","uid":"pod-2"},"sandbox":{"network":"k8s-pod-network","containerID":"new"},"ips":["10.0.0.3"],"outcome":"returned"}`
	w := httptest.NewRecorder()
	srv.handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, wire.ReturnOutcomePath, strings.NewReader(body)))
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		held, err := store.ListNode(ctx, "n1")
		if err == nil && len(held) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still held after the report: %v %v", held, err)
		}
	}
}

// slowStore takes its time to end reservations, as a busy datastore does.
type slowStore struct {
	reserve.Store
	delay time.Duration
}

func (s *slowStore) Release(ctx context.Context, refs []reserve.Ref) ([]reserve.Ref, error) {
	time.Sleep(s.delay)
	return s.Store.Release(ctx, refs)
}

// An agent told to stop (a rolling update) ends the returns it was told of
// before its server returns: cut off, they would stay reserved.
func TestServerStopsOnlyAfterTheReturnsInFlight(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	store := &slowStore{Store: reservetest.NewStore(reserve.DefaultLimits), delay: 300 * time.Millisecond}
	r, pod := returnsHolding(t, store)
	srv := serverFor(r, &fakeCluster{pod: pod})
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "a.sock"))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.serve(ctx, l) }()
	client := wire.NewClient(l.Addr().String())
	r.o.offers.remember(pod, []string{"10.0.0.3"})
	report := reportFor("10.0.0.3")
	if err := client.ReportReturn(ctx, &report); err != nil {
		t.Fatal(err)
	}
	cancel() // SIGTERM while the reservation is being ended
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if held, err := store.ListNode(context.Background(), "n1"); err != nil || len(held) != 0 {
		t.Fatalf("the server stopped with the return's reservation still held: %v %v", held, err)
	}
}

// testReturns are an offerer and a settler wired as New wires them.
type testReturns struct {
	o *offerer
	s *settler
}

// setMode sets the returnAddress both halves read.
func (r testReturns) setMode(mode func() config.ReturnMode) { r.o.mode, r.s.mode = mode, mode }

// serverFor is a server answering with r, its pods from cluster.
func serverFor(r testReturns, cluster Cluster) *server {
	r.s.pods = cluster.Pod
	return &server{cluster: cluster, offerer: r.o, settler: r.s, metrics: r.o.metrics}
}

// returnsHolding is an offerer and a settler over store, which it makes
// hold 10.0.0.3 for ns/redis-3 on n1.
func returnsHolding(t *testing.T, store reserve.Store) (testReturns, *corev1.Pod) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "redis-3", UID: "pod-2"}}
	e := reserve.Entry{IP: "10.0.0.3", Namespace: "ns", Pod: "redis-3", PodUID: "pod-2", Reason: reserve.ReasonCNIDel, ReservedAt: time.Unix(100, 0)}
	if _, err := store.Reserve(context.Background(), "n1", []reserve.Entry{e}); err != nil {
		t.Fatal(err)
	}
	pod.Spec.NodeName = "n1"
	noCalico := func(context.Context, []reserve.Entry) (*calicoview.View, error) {
		return nil, errors.New("no Calico in this test")
	}
	held, offered, rec, m := newHeldIndex("n1"), &offers{}, record.NewFakeRecorder(10), newMetrics()
	return testReturns{
		o: &offerer{node: "n1", store: store, held: held, recorder: rec, metrics: m, views: noCalico, offers: offered},
		s: &settler{
			node: "n1", store: store, held: held, recorder: rec, metrics: m, offers: offered, guard: &addrGuard{},
			sandboxes: &fakeSandboxes{state: sandboxUp, holder: "k8s-pod-network.new"},
		},
	}, pod
}

// reportFor is capo-ipam's report that redis-3's new sandbox got ips back.
func reportFor(ips ...string) wire.ReturnOutcome {
	return wire.ReturnOutcome{
		Pod:     wire.PodRef{Namespace: "ns", Name: "redis-3", UID: "pod-2"},
		Sandbox: wire.Sandbox{Network: "k8s-pod-network", ContainerID: "new", IfName: "eth0"},
		IPs:     ips, Outcome: wire.Returned,
	}
}

// fakeSandboxes answers as Calico would for redis-3's new sandbox: its
// state (after settingUp reads of "setting up"), and who holds 10.0.0.3.
type fakeSandboxes struct {
	mu        sync.Mutex
	state     sandboxState
	settingUp int
	holder    string // handle; "" = free
	reads     int
}

func (f *fakeSandboxes) State(_ context.Context, _ string, _ *corev1.Pod, sb wire.Sandbox, _ []string) (sandboxState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.holder != sb.Handle() {
		return sandboxGone, nil
	}
	if f.settingUp > 0 {
		f.settingUp--
		return sandboxSettingUp, nil
	}
	return f.state, nil
}

func (f *fakeSandboxes) Holder(_ context.Context, _ string) (*calico.Holder, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holder == "" {
		return nil, nil
	}
	return &calico.Holder{Handle: f.holder, Namespace: "ns", Pod: "redis-3"}, nil
}
