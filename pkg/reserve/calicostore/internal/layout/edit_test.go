package layout

import (
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

func TestReleaseStampAndRetire(t *testing.T) {
	c := bucketWith(reserve.Entry{IP: "10.0.0.1", Node: "n1", ReservedAt: at}, reserve.Entry{IP: "10.0.0.2", Node: "n2", ReservedAt: at})
	refs, err := reserve.NewRefSet([]reserve.Ref{{Node: "n1", IP: "10.0.0.1/32"}, {Node: "n1", IP: "10.0.0.2"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Release(refs); len(got) != 1 || got[0] != (reserve.Ref{Node: "n1", IP: "10.0.0.1"}) {
		t.Fatalf("released %v (10.0.0.2 is held for n2)", got)
	}
	if c.Retirable() {
		t.Fatal("retirable while it holds 10.0.0.2")
	}
	n2 := reserve.RefSet{{Node: "n2", IP: "10.0.0.2"}: true}
	if !c.Stamp(n2, at.Add(90*time.Second)) || c.Stamp(n2, at.Add(time.Hour)) || !c.Entries["10.0.0.2"].Seen.Equal(at.Add(90*time.Second)) {
		t.Fatalf("stamp: %+v (the first stamp stays)", c.Entries)
	}
	c.Release(n2)
	c.Relist(1)
	if c.Retirable() {
		t.Fatal("a head that lists overflow objects is not retirable")
	}
	c.Unlist(1)
	if !c.Retirable() {
		t.Fatal("empty and unlisted: retirable")
	}
	if _, err := reserve.NewRefSet([]reserve.Ref{{Node: "n1", IP: "10.0.0.300"}}); err == nil {
		t.Fatal("a bad address must be an error, not a release that matches nothing")
	}
}

// A ref taken from an entry releases that entry only: the same pod torn
// down again from another sandbox, or another pod's entry at the same
// place, stays and is not reported released. A ref by place still takes
// whatever is there.
func TestReleaseTakesOnlyTheEntryNamed(t *testing.T) {
	planned := reserve.Entry{IP: "10.0.0.1", Node: "n1", Namespace: "kafka", Pod: "broker-0", PodUID: "u1", Sandbox: "aaaa", ReservedAt: at}
	renewed := planned
	renewed.Sandbox, renewed.ReservedAt = "bbbb", at.Add(time.Minute)
	other := planned
	other.Pod, other.PodUID = "broker-1", "u2"
	for name, now := range map[string]reserve.Entry{"renewed": renewed, "another pod": other} {
		c := bucketWith(now)
		refs, err := reserve.NewRefSet([]reserve.Ref{planned.Ref()})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Release(refs); len(got) != 0 || len(c.Entries) != 1 {
			t.Fatalf("%s: released %v, left %v: the planned entry is no longer there", name, got, c.Entries)
		}
		if c.Stamp(refs, at) {
			t.Fatalf("%s: stamped an entry the ref does not name", name)
		}
		if got := c.Release(reserve.RefSet{now.Ref(): true}); len(got) != 1 || got[0] != now.Ref() {
			t.Fatalf("%s: its own ref released %v", name, got)
		}
	}
	c := bucketWith(renewed)
	if got := c.Release(reserve.RefSet{planned.Place(): true}); len(got) != 1 || got[0] != planned.Place() {
		t.Fatalf("by place: released %v", got)
	}
}
