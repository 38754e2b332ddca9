package calicostore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/pkg/reserve/calicostore/internal/layout"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
)

var (
	ctx = context.Background()
	t0  = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
)

func entry(ip string) reserve.Entry {
	return reserve.Entry{
		IP: ip, Namespace: "kafka", Pod: "broker-" + ip, PodUID: "uid-" + ip, Reason: reserve.ReasonCNIDel,
		ReservedAt: t0, OwnerKind: "StatefulSet", OwnerName: "broker", OwnerUID: "owner",
	}
}

func ips(es []reserve.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.IP)
	}
	return out
}

func mustReserve(t *testing.T, s reserve.Store, node string, ips ...string) *reserve.Result {
	t.Helper()
	var es []reserve.Entry
	for _, ip := range ips {
		es = append(es, entry(ip))
	}
	res, err := s.Reserve(ctx, node, es)
	if err != nil {
		t.Fatalf("reserving %v on %s: %v", ips, node, err)
	}
	return res
}

func nodeIPs(t *testing.T, s reserve.Store, node string) []string {
	t.Helper()
	es, err := s.ListNode(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	return ips(es)
}

func TestReserveReleaseRoundTrip(t *testing.T) {
	s := reservetest.NewStore(reserve.DefaultLimits)
	res := mustReserve(t, s, "n1", "10.0.0.1", "FD00:0::1")
	if !slices.Equal(res.Added, []string{"10.0.0.1", "fd00::1"}) {
		t.Fatalf("added %v", res.Added)
	}
	later := entry("fd00::1/128")
	later.ReservedAt = t0.Add(time.Hour)
	res, err := s.Reserve(ctx, "n1", []reserve.Entry{later})
	if err != nil || !slices.Equal(res.AlreadyHeld, []string{"fd00::1"}) {
		t.Fatalf("again as another spelling: %+v %v", res, err)
	}
	es, _ := s.ListNode(ctx, "n1")
	if len(es) != 2 || !es[1].ReservedAt.Equal(t0) || es[1].Node != "n1" || es[1].Pod != "broker-FD00:0::1" {
		t.Fatalf("entries %+v (first timestamp kept)", es)
	}
	if got := nodeIPs(t, s, "n2"); len(got) != 0 {
		t.Fatalf("n2 holds %v", got)
	}
	rel, err := s.Release(ctx, []reserve.Ref{{Node: "n1", IP: "fd00::1/128"}, {Node: "n1", IP: "10.0.0.1"}, {Node: "n1", IP: "10.9.9.9"}})
	if err != nil || len(rel) != 2 {
		t.Fatalf("released %v %v", rel, err)
	}
	if names := s.Objects.Names(); len(names) != 0 {
		t.Fatalf("objects left after releasing everything: %v", names)
	}
}

// A node's teardowns batched into one Reserve are one write.
func TestOneNodesBatchIsOneWrite(t *testing.T) {
	s := reservetest.NewStore(reserve.DefaultLimits)
	mustReserve(t, s, "n1", "10.0.0.1")
	before := s.Objects.Calls("update") + s.Objects.Calls("create")
	mustReserve(t, s, "n1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5")
	if w := s.Objects.Calls("update") + s.Objects.Calls("create") - before; w != 1 {
		t.Fatalf("%d writes for one batch", w)
	}
}

// However many nodes (here 300) hold reservations, the objects are at most one per
// bucket while each bucket fits in one object, and none once all is released.
func TestObjectsAreBoundedByBuckets(t *testing.T) {
	s := reservetest.NewStore(reserve.DefaultLimits)
	var all []reserve.Ref
	for n := range 300 {
		node := fmt.Sprintf("node-%d", n)
		ip := fmt.Sprintf("10.%d.%d.1", n/250, n%250)
		mustReserve(t, s, node, ip)
		all = append(all, reserve.Ref{Node: node, IP: ip})
	}
	if n := len(s.Objects.Names()); n > layout.Buckets {
		t.Fatalf("%d objects for 300 nodes; want at most %d", n, layout.Buckets)
	}
	l, err := s.List(ctx)
	if err != nil || len(l.Entries) != 300 {
		t.Fatalf("listed %d, %v", len(l.Entries), err)
	}
	if rel, err := s.Release(ctx, all); err != nil || len(rel) != 300 {
		t.Fatalf("released %d, %v", len(rel), err)
	}
	if names := s.Objects.Names(); len(names) != 0 {
		t.Fatalf("left %v", names)
	}
}

// A full bucket gains overflow objects, listed in its head; emptied ones
// are deleted and unlisted; the head goes last.
func TestOverflowObjectsComeAndGo(t *testing.T) {
	s := reservetest.NewStore(reserve.Limits{MaxIPs: 2, MaxAnnotationBytes: 1 << 20})
	mustReserve(t, s, "n1", "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5")
	b := calicostore.BucketOf("n1")
	want := []string{calicostore.BucketName(b, 0), calicostore.BucketName(b, 1), calicostore.BucketName(b, 2)}
	if got := s.Objects.Names(); !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
	if h, _ := s.Objects.Object(want[0]); h.Annotations[calicostore.OverflowAnnotation] != "1,2" {
		t.Fatalf("head lists %q", h.Annotations[calicostore.OverflowAnnotation])
	}
	if _, err := s.Release(ctx, []reserve.Ref{{Node: "n1", IP: "10.0.0.5"}, {Node: "n1", IP: "10.0.0.1"}, {Node: "n1", IP: "10.0.0.2"}}); err != nil {
		t.Fatal(err)
	}
	if got := s.Objects.Names(); !slices.Equal(got, want[:2]) {
		t.Fatalf("after releasing the last object's: %v", got)
	}
	if h, _ := s.Objects.Object(want[0]); h.Annotations[calicostore.OverflowAnnotation] != "1" || len(h.CIDRs) != 0 {
		t.Fatalf("head %+v: empty, still listing 1", h)
	}
	mustReserve(t, s, "n1", "10.0.0.6") // the empty head is filled first
	if got := nodeIPs(t, s, "n1"); !slices.Equal(got, []string{"10.0.0.3", "10.0.0.4", "10.0.0.6"}) {
		t.Fatalf("n1 holds %v", got)
	}
	if _, err := s.Release(ctx, []reserve.Ref{{Node: "n1", IP: "10.0.0.3"}, {Node: "n1", IP: "10.0.0.4"}, {Node: "n1", IP: "10.0.0.6"}}); err != nil {
		t.Fatal(err)
	}
	if got := s.Objects.Names(); len(got) != 0 {
		t.Fatalf("left %v", got)
	}
}

// A listed overflow object that is missing does not end the read.
func TestListNodeReadsPastAGap(t *testing.T) {
	s := reservetest.NewStore(reserve.Limits{MaxIPs: 1, MaxAnnotationBytes: 1 << 20})
	mustReserve(t, s, "n1", "10.0.0.1", "10.0.0.2", "10.0.0.3")
	b := calicostore.BucketOf("n1")
	if _, err := s.Objects.Delete(ctx, calicostore.BucketName(b, 1), deleteAny); err != nil {
		t.Fatal(err)
	}
	if got := nodeIPs(t, s, "n1"); !slices.Equal(got, []string{"10.0.0.1", "10.0.0.3"}) {
		t.Fatalf("n1 holds %v past the gap", got)
	}
	mustReserve(t, s, "n1", "10.0.0.4") // fills the gap
	if o, ok := s.Objects.Object(calicostore.BucketName(b, 1)); !ok || len(o.CIDRs) != 1 {
		t.Fatalf("gap not refilled: %+v", o)
	}
}

func TestStampSetsSeenOnce(t *testing.T) {
	s := reservetest.NewStore(reserve.DefaultLimits)
	mustReserve(t, s, "n1", "10.0.0.1", "10.0.0.2")
	refs := []reserve.Ref{{Node: "n1", IP: "10.0.0.1"}}
	if err := s.Stamp(ctx, refs, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.Stamp(ctx, refs, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	es, _ := s.ListNode(ctx, "n1")
	if !es[0].Seen.Equal(t0.Add(time.Minute)) || !es[1].Seen.IsZero() {
		t.Fatalf("seen %v %v", es[0].Seen, es[1].Seen)
	}
}

func TestReownChangesOnlyStatefulSetEntriesOwner(t *testing.T) {
	s := reservetest.NewStore(reserve.DefaultLimits)
	member := reserve.Entry{IP: "10.0.0.1", Namespace: "kafka", Pod: "broker-0", Reason: reserve.ReasonCNIDel, ReservedAt: t0, OwnerKind: "StatefulSet", OwnerName: "broker", OwnerUID: "old"}
	loose := reserve.Entry{IP: "10.0.0.2", Namespace: "kafka", Pod: "x", Reason: reserve.ReasonCNIDel, ReservedAt: t0}
	if _, err := s.Reserve(ctx, "n1", []reserve.Entry{member, loose}); err != nil {
		t.Fatal(err)
	}
	es, _ := s.ListNode(ctx, "n1")
	if err := s.Reown(ctx, []reserve.Ref{es[0].Ref(), es[1].Ref()}, "new"); err != nil {
		t.Fatal(err)
	}
	after, _ := s.ListNode(ctx, "n1")
	if after[0].OwnerUID != "new" || after[0].Ref() != es[0].Ref() || after[1].OwnerUID != "" {
		t.Fatalf("after %+v", after)
	}
}
