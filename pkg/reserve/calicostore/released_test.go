package calicostore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
)

// A teardown released by hand is refused when reserved again (a coverage,
// a journal replayed), from another store on the same datastore too; a
// later teardown of the address is not. The release's mark keeps the
// emptied object until it expires, then the controller's tidy deletes it.
func TestReleaseByHandIsNotReservedAgain(t *testing.T) {
	s := reservetest.NewStore(reserve.DefaultLimits)
	e := entry("10.0.0.1")
	e.Sandbox = "sandbox-1"
	if _, err := s.Reserve(ctx, "n1", []reserve.Entry{e}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	done, err := s.ReleaseByHand(ctx, []reserve.Ref{{Node: "n1", IP: "10.0.0.1"}}, now)
	if err != nil || len(done) != 1 {
		t.Fatalf("released %v, %v", done, err)
	}
	agent := s.Clone(reserve.DefaultLimits) // the node's agent, replaying
	res, err := agent.Reserve(ctx, "n1", []reserve.Entry{e})
	if err != nil || len(res.Refused) != 1 || len(res.Added) != 0 {
		t.Fatalf("reserving the released teardown again: %+v, %v", res, err)
	}
	if got := nodeIPs(t, s, "n1"); len(got) != 0 {
		t.Fatalf("held %v", got)
	}
	if _, err := s.Tidy(ctx); err != nil || len(s.Objects.Names()) != 1 {
		t.Fatalf("tidy: objects %v, %v; the mark keeps its object", s.Objects.Names(), err)
	}
	later := e
	later.Sandbox, later.ReservedAt = "sandbox-2", e.ReservedAt.Add(time.Minute)
	if res, err := agent.Reserve(ctx, "n1", []reserve.Entry{later}); err != nil || len(res.Added) != 1 {
		t.Fatalf("a later teardown of the address: %+v, %v", res, err)
	}

	// A mark past reserve.ReleasedByHandKept is dropped, and its emptied
	// object goes.
	if _, err := s.List(ctx); err != nil { // the agent wrote since
		t.Fatal(err)
	}
	if done, err := s.ReleaseByHand(ctx, []reserve.Ref{{Node: "n1", IP: "10.0.0.1"}}, now.Add(-reserve.ReleasedByHandKept)); err != nil || len(done) != 1 {
		t.Fatalf("released %v, %v", done, err)
	}
	if _, err := s.Tidy(ctx); err != nil {
		t.Fatal(err)
	}
	if names := s.Objects.Names(); len(names) != 0 {
		t.Fatalf("objects %v left after the marks expired", names)
	}
	if res, err := agent.Reserve(ctx, "n1", []reserve.Entry{later}); err != nil || len(res.Added) != 1 {
		t.Fatalf("an expired mark still refuses: %+v, %v", res, err)
	}
}

// A release over several objects tells each object's refs as its write
// lands, before the next write: together, what Release returns.
func TestReleaseTellsEachWriteAsItLands(t *testing.T) {
	s := reservetest.NewStore(reserve.DefaultLimits)
	var refs []reserve.Ref
	nodes := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	for i := range 24 {
		e, node := entry(fmt.Sprintf("10.0.%d.%d", i%3, i)), nodes[i%len(nodes)]
		e.Node = node
		if _, err := s.Reserve(ctx, node, []reserve.Entry{e}); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, reserve.Ref{Node: node, IP: e.IP})
	}
	objects := len(s.Objects.Names())
	if objects < 2 {
		t.Fatalf("setup: %d objects; want the entries spread over several", objects)
	}
	var calls [][]reserve.Ref
	held := []int{}
	done, err := s.Release(reserve.WithWritten(ctx, func(got []reserve.Ref) {
		calls = append(calls, got)
		l, err := s.Clone(reserve.DefaultLimits).List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, len(l.Entries))
	}), refs)
	if err != nil || len(done) != len(refs) {
		t.Fatalf("released %d of %d: %v", len(done), len(refs), err)
	}
	told := 0
	for i, c := range calls {
		told += len(c)
		if want := len(refs) - told; held[i] != want {
			t.Fatalf("write %d told with %d still held; want %d: told before it landed, or after the next", i, held[i], want)
		}
	}
	if len(calls) < 2 || told != len(refs) {
		t.Fatalf("%d calls telling %d refs over %d objects; want one a write, %d in all", len(calls), told, objects, len(refs))
	}
}
