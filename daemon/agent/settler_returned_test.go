package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

func heldOn(t *testing.T, store reserve.Store) int {
	t.Helper()
	held, err := store.ListNode(context.Background(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	return len(held)
}

// A return's reservation ends only once Calico shows the sandbox that asked
// for the address up with it. A sandbox whose set-up fails after IPAM (the
// calico plugin then releases the address) leaves it reserved, and so does
// one not up within the wait: the reconcile looks again later.
func TestReturnEndsOnlyOnceTheSandboxIsUp(t *testing.T) {
	cases := []struct {
		name      string
		state     sandboxState
		settingUp int
		holder    string
		wantHeld  int
	}{
		{"up after setting up", sandboxUp, 2, "k8s-pod-network.new", 0},
		{"set-up failed after IPAM: Calico released the address", sandboxUp, 0, "", 1},
		{"the address is another sandbox's", sandboxUp, 0, "k8s-pod-network.other", 1},
		{"never up within the wait", sandboxSettingUp, 0, "k8s-pod-network.new", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := reservetest.NewStore(reserve.DefaultLimits)
			r, pod := returnsHolding(t, store)
			r.s.sandboxes = &fakeSandboxes{state: tc.state, settingUp: tc.settingUp, holder: tc.holder}
			r.s.confirmFor = 500 * time.Millisecond
			r.s.guard.expect([]string{"10.0.0.3"})
			r.s.returned(context.Background(), pod, reportFor("10.0.0.3"))
			if got := heldOn(t, store); got != tc.wantHeld {
				t.Fatalf("%d held, want %d", got, tc.wantHeld)
			}
		})
	}
}

// The socket is trusted no further than the offers the agent made: a
// report of a return nobody was offered ends nothing and reads nothing.
func TestReturnReportWithoutAnOfferIsIgnored(t *testing.T) {
	for name, offered := range map[string][]string{"no offer": nil, "another address offered": {"10.0.0.9"}} {
		t.Run(name, func(t *testing.T) {
			store := reservetest.NewStore(reserve.DefaultLimits)
			r, pod := returnsHolding(t, store)
			if offered != nil {
				r.o.offers.remember(pod, offered)
			}
			srv := serverFor(r, &fakeCluster{pod: pod})
			body := `{"pod":{"namespace":"ns","name":"redis-3","uid":"pod-2"},"sandbox":{"network":"k8s-pod-network","containerID":"new"},"ips":["10.0.0.3"],"outcome":"returned"}`
			w := httptest.NewRecorder()
			srv.handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, wire.ReturnOutcomePath, strings.NewReader(body)))
			r.s.wait(context.Background())
			if w.Code != http.StatusOK || heldOn(t, store) != 1 || r.s.sandboxes.(*fakeSandboxes).reads != 0 {
				t.Fatalf("answer %d, %d held, %d reads: an unoffered report was acted on", w.Code, heldOn(t, store), r.s.sandboxes.(*fakeSandboxes).reads)
			}
		})
	}
}

// A return nobody reported (capo-ipam could not reach the agent) ends at
// the next read of the node's reservations, once Calico shows the pod's
// current sandbox up with the address; the sandbox the reservation was
// made for, or one not up, ends nothing.
func TestReconcileEndsAReturnNobodyReported(t *testing.T) {
	cases := []struct {
		name     string
		holder   string
		state    sandboxState
		wantHeld int
	}{
		{"up in a new sandbox", "k8s-pod-network.new", sandboxUp, 0},
		{"still the torn-down sandbox's", "k8s-pod-network.old", sandboxUp, 1},
		{"new sandbox not up", "k8s-pod-network.new", sandboxSettingUp, 1},
		{"free", "", sandboxUp, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := reservetest.NewStore(reserve.DefaultLimits)
			r, pod := returnsHolding(t, store)
			r.s.sandboxes = &fakeSandboxes{state: tc.state, holder: tc.holder}
			entries, err := store.ListNode(context.Background(), "n1")
			if err != nil {
				t.Fatal(err)
			}
			entries[0].Sandbox = reserve.SandboxOf("old")
			podOf := func(string, string) *corev1.Pod { return pod }
			r.s.reconcile(context.Background(), entries, podOf, func(string) string { return "eth0" })
			if got := heldOn(t, store); got != tc.wantHeld {
				t.Fatalf("%d held, want %d", got, tc.wantHeld)
			}
		})
	}
}

// A reserve request's addresses and decision come from capo-ipam's record
// on the host, never from the socket: 300 addresses sent by anyone who can
// reach it reserve nothing.
func TestReserveTrustsTheHostsRecordOnly(t *testing.T) {
	ips := make([]string, 300)
	for i := range ips {
		ips[i] = "10.1." + string(rune('0'+i/100)) + "." + string(rune('0'+i%10))
	}
	dec := &recordingDecider{}
	var rec *journal.AddrRecord
	srv := &server{
		decider: dec, metrics: newMetrics(), timeout: func() time.Duration { return time.Second },
		records: func(string, string, string) *journal.AddrRecord { return rec },
		ipam:    &handleIPAM{}, node: "n1",
	}
	send := func() {
		body := `{"containerID":"c1","network":"k8s-pod-network","ifName":"eth0","pod":{"namespace":"ns","name":"redis-0"},"recordedIPs":["` + strings.Join(ips, `","`) + `"],"atAdd":{"selected":true}}`
		w := httptest.NewRecorder()
		srv.handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, wire.ReservePath, strings.NewReader(body)))
		if w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	send()
	if dec.got.ContainerID != "" {
		t.Fatalf("the socket's addresses or decision reached the decider: %+v", dec.got)
	}
	rec = &journal.AddrRecord{Pod: wire.PodRef{Namespace: "ns", Name: "redis-0"}, IPs: []string{"10.0.0.3"}, AtAdd: &wire.Decision{Selected: true, Rule: "r"}}
	send()
	if strings.Join(dec.got.RecordedIPs, ",") != "10.0.0.3" || dec.got.AtAdd == nil || dec.got.AtAdd.Rule != "r" {
		t.Fatalf("the host's record did not reach the decider: %+v", dec.got)
	}
}

type recordingDecider struct{ got wire.ReserveRequest }

func (d *recordingDecider) Decide(_ context.Context, req *wire.ReserveRequest) (*wire.ReserveResponse, error) {
	d.got = *req
	return &wire.ReserveResponse{Outcome: wire.NotSelected}, nil
}

// A teardown replayed after its pod object is gone keeps the StatefulSet
// capo-ipam recorded at ADD: the set's next member finds the address.
func TestReplayedTeardownKeepsTheOwner(t *testing.T) {
	optedIn := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	res := &fakeReserver{}
	d := &decider{
		cluster: &fakeCluster{node: optedIn}, ipam: &fakeIPAM{ips: []cnet.IP{cnet.MustParseIP("10.0.0.3")}}, reserve: res,
		selectors: func() []selection.Selector { return config.Default().Selectors },
		observe:   func(time.Duration) {}, now: time.Now,
	}
	at := &wire.Decision{Selected: true, Rule: "r", Owner: &wire.Owner{Kind: "StatefulSet", Name: "redis", UID: "set-1"}}
	req := &wire.ReserveRequest{ContainerID: "c1", Network: "k8s-pod-network", Pod: wire.PodRef{Namespace: "ns", Name: "redis-3", UID: "pod-1"}, AtAdd: at}
	if _, err := d.Decide(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(res.got) != 1 || res.got[0].OwnerUID != "set-1" || res.got[0].OwnerKind != "StatefulSet" {
		t.Fatalf("reserved %+v, want the owner from the ADD record", res.got)
	}
}

// A teardown journaled while the agent was away at ADD and at DEL, and
// replayed after its pod object is gone, takes its StatefulSet from the
// member that now has its name: the set's reservation time applies, not
// the default's. A later pod of the name that no set owns adds nothing.
func TestReplayedTeardownTakesTheOwnerOfItsSuccessor(t *testing.T) {
	optedIn := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	isController := true
	member := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "redis-3", UID: "pod-2", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "redis", UID: "set-1", Controller: &isController},
	}}}
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "redis-3", UID: "pod-3"}}
	for _, tc := range []struct {
		name      string
		successor *corev1.Pod
		atAdd     *wire.Decision
		wantOwner string
	}{
		{"the set's next member", member, nil, "set-1"},
		{"no owner recorded at ADD", member, &wire.Decision{Selected: true, Rule: "r"}, "set-1"},
		{"the owner recorded at ADD wins", member, &wire.Decision{Selected: true, Rule: "r", Owner: &wire.Owner{Kind: "StatefulSet", Name: "redis", UID: "set-0"}}, "set-0"},
		{"a plain pod of the name", plain, nil, ""},
		{"no pod of the name", nil, nil, ""},
	} {
		res := &fakeReserver{}
		d := &decider{
			cluster: &fakeCluster{node: optedIn, successor: tc.successor}, ipam: &fakeIPAM{ips: []cnet.IP{cnet.MustParseIP("10.0.0.3")}}, reserve: res,
			selectors: func() []selection.Selector { return config.Default().Selectors },
			observe:   func(time.Duration) {}, now: time.Now,
		}
		req := &wire.ReserveRequest{ContainerID: "c1", Network: "k8s-pod-network", Pod: wire.PodRef{Namespace: "ns", Name: "redis-3", UID: "pod-1"}, AtAdd: tc.atAdd}
		if _, err := d.Decide(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if len(res.got) != 1 || res.got[0].OwnerUID != tc.wantOwner || res.got[0].PodUID != "pod-1" {
			t.Fatalf("%s: reserved %+v, want owner %q and the torn-down pod's UID", tc.name, res.got, tc.wantOwner)
		}
		if tc.wantOwner == "set-1" && (res.got[0].OwnerKind != "StatefulSet" || res.got[0].OwnerName != "redis") {
			t.Fatalf("%s: reserved %+v, want StatefulSet redis", tc.name, res.got)
		}
	}
}

// A reservation write waits only for the writes of its own addresses.
func TestAddrLocksAreByAddress(t *testing.T) {
	var l addrLocks
	unlockA := l.lock([]string{"10.0.0.3"})
	done := make(chan struct{})
	go func() { l.lock([]string{"10.0.0.4", "10.0.0.5"})(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("a write of other addresses waited on 10.0.0.3")
	}
	again := make(chan struct{})
	go func() { l.lock([]string{"10.0.0.5", "10.0.0.3"})(); close(again) }()
	select {
	case <-again:
		t.Fatal("two writes of 10.0.0.3 at once")
	case <-time.After(100 * time.Millisecond):
	}
	unlockA()
	<-again
	if len(l.locks) != 0 {
		t.Fatalf("locks kept after use: %v", l.locks)
	}
}

// The index only spares a read to pods with nothing held: an address it
// still lists, since released by capo-controller, is not offered.
func TestOfferReadsTheReservationsAfresh(t *testing.T) {
	ctx := context.Background()
	store := reservetest.NewStore(reserve.DefaultLimits)
	r, pod := returnsHolding(t, store)
	r.setMode(func() config.ReturnMode { return config.ReturnSameNode })
	r.o.timeout = time.Second
	entries, err := store.ListNode(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	r.o.held.replace(entries)
	if _, err := store.Release(ctx, []reserve.Ref{entries[0].Ref()}); err != nil {
		t.Fatal(err)
	}
	if got := r.o.offer(ctx, pod, nil, selection.Decision{Verdict: selection.Selected}, "k8s-pod-network"); got != nil {
		t.Fatalf("offered %+v from a stale index", got)
	}
}

// With anyNode a pod may have got back, on this node, an address another
// node's teardown reserved: the reconcile reads every node's reservations
// then, and ends that one too once Calico shows the pod up with it.
func TestReconcileAnyNodeReadsEveryNode(t *testing.T) {
	ctx := context.Background()
	store := reservetest.NewStore(reserve.DefaultLimits)
	e := reserve.Entry{IP: "10.0.0.7", Namespace: "ns", Pod: "redis-3", PodUID: "pod-2", Reason: reserve.ReasonCNIDel, ReservedAt: time.Unix(100, 0), Sandbox: "old"}
	if _, err := store.Reserve(ctx, "n2", []reserve.Entry{e}); err != nil {
		t.Fatal(err)
	}
	r, pod := returnsHolding(t, store)
	for _, tc := range []struct {
		mode config.ReturnMode
		want int
	}{{config.ReturnSameNode, 1}, {config.ReturnAnyNode, 0}} {
		mode, want := tc.mode, tc.want
		r.setMode(func() config.ReturnMode { return mode })
		r.s.reconcile(ctx, r.s.reconcilable(ctx, nil), func(string, string) *corev1.Pod { return pod }, func(string) string { return "eth0" })
		held, err := store.ListNode(ctx, "n2")
		if err != nil {
			t.Fatal(err)
		}
		if len(held) != want {
			t.Fatalf("%s: n2 holds %d, want %d", mode, len(held), want)
		}
	}
}
