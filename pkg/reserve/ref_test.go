package reserve

import (
	"testing"
	"time"
)

// A ref taken from an entry releases that entry only: the same pod torn
// down again from another sandbox, or another pod's entry at the same
// place, stays and is not reported released. A ref by place still takes
// whatever is there.
func TestReleaseTakesOnlyTheEntryNamed(t *testing.T) {
	planned := Entry{IP: "10.0.0.1", Node: "n1", Namespace: "kafka", Pod: "broker-0", PodUID: "u1", Sandbox: "aaaa", ReservedAt: at}
	renewed := planned
	renewed.Sandbox, renewed.ReservedAt = "bbbb", at.Add(time.Minute)
	other := planned
	other.Pod, other.PodUID = "broker-1", "u2"
	for name, now := range map[string]Entry{"renewed": renewed, "another pod": other} {
		c := bucketWith(now)
		refs, err := NewRefSet([]Ref{planned.Ref()})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Release(refs); len(got) != 0 || len(c.Entries) != 1 {
			t.Fatalf("%s: released %v, left %v: the planned entry is no longer there", name, got, c.Entries)
		}
		if c.Stamp(refs, at) {
			t.Fatalf("%s: stamped an entry the ref does not name", name)
		}
		if got := c.Release(RefSet{now.Ref(): true}); len(got) != 1 || got[0] != now.Ref() {
			t.Fatalf("%s: its own ref released %v", name, got)
		}
	}
	c := bucketWith(renewed)
	if got := c.Release(RefSet{planned.Place(): true}); len(got) != 1 || got[0] != planned.Place() {
		t.Fatalf("by place: released %v", got)
	}
}

// Seen is set by the controller after the plan's read: it is no part of
// the entry's name.
func TestRefIgnoresSeen(t *testing.T) {
	e := Entry{IP: "10.0.0.1", Node: "n1", Pod: "p", ReservedAt: at}
	seen := e
	seen.Seen = at.Add(time.Hour)
	if e.Ref() != seen.Ref() || e.Ref().ReservedAt != at.Unix() {
		t.Fatalf("refs %+v and %+v", e.Ref(), seen.Ref())
	}
	if (Entry{IP: "10.0.0.1", Node: "n1"}).Ref() != (Ref{Node: "n1", IP: "10.0.0.1"}) {
		t.Fatal("an entry without metadata is named by its place")
	}
}
