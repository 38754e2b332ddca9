package layout

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

// Collect merges what objects hold into a listing. A reservation held in
// two objects (a teardown that raced a migration) is one entry: the older
// metadata and first timestamp.
func Collect(objs []*Contents) *reserve.Listing {
	l := &reserve.Listing{}
	byRef := map[reserve.Ref]reserve.Entry{}
	for _, c := range objs {
		switch {
		case c.Err != nil:
			l.Unreadable = append(l.Unreadable, reserve.Unreadable{Object: c.Name, Addresses: len(c.Entries), Err: c.Err})
			continue
		case c.Legacy() && !c.Retired:
			l.Legacy++
		}
		for _, e := range c.Entries {
			if prev, ok := byRef[e.Place()]; ok {
				e = merge(prev, e)
			}
			byRef[e.Place()] = e
		}
	}
	l.Entries = slices.Collect(maps.Values(byRef))
	reserve.SortEntries(l.Entries)
	slices.SortFunc(l.Unreadable, func(a, b reserve.Unreadable) int { return strings.Compare(a.Object, b.Object) })
	return l
}

// same reports whether two entries say the same, times compared as instants.
func same(e, o reserve.Entry) bool {
	x, y := e, o
	x.ReservedAt, x.Seen, y.ReservedAt, y.Seen = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return x == y && e.ReservedAt.Equal(o.ReservedAt) && e.Seen.Equal(o.Seen)
}

// toSecond is t as stored: whole seconds, UTC.
func toSecond(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.Unix(t.Unix(), 0).UTC()
}

// older reports whether a was reserved first; it decides which copy of a
// reservation held twice is kept.
func older(a, b reserve.Entry) bool {
	if a.ReservedAt.IsZero() != b.ReservedAt.IsZero() {
		return !a.ReservedAt.IsZero() // metadata beats none (a CIDR added by hand)
	}
	return a.ReservedAt.Before(b.ReservedAt)
}

// renews reports whether e, reserving an address already held as old, is a
// later teardown of the same pod: from another sandbox (the pod got the
// address back, and lost it again before capo-controller ended the old
// reservation), or of the running pod that old held while calico-node was
// replaced (a hold is no teardown: the time counts from the teardown).
// Then e replaces old, so that its age and its sandbox are the latest
// teardown's. A DEL repeated for one sandbox (a retry, a replay) renews
// nothing: the first timestamp stands.
func renews(old, e reserve.Entry) bool {
	if e.Namespace != old.Namespace || e.Pod != old.Pod || !e.ReservedAt.After(old.ReservedAt) {
		return false
	}
	if old.Reason == reserve.ReasonCNIRewrite && e.Reason != reserve.ReasonCNIRewrite {
		return true
	}
	return e.Sandbox != "" && old.Sandbox != "" && e.Sandbox != old.Sandbox
}

// merge is the one entry two copies of a reservation stand for: the
// older's metadata and first timestamp, and the earliest Seen.
func merge(a, b reserve.Entry) reserve.Entry {
	keep, other := a, b
	if older(b, a) {
		keep, other = b, a
	}
	if keep.Seen.IsZero() || !other.Seen.IsZero() && other.Seen.Before(keep.Seen) {
		keep.Seen = other.Seen
	}
	return keep
}
