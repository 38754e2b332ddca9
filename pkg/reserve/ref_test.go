package reserve

import (
	"testing"
	"time"
)

var at = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

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
