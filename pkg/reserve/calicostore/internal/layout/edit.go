package layout

import (
	"slices"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

// Holds reports whether the object holds any of refs.
func (c *Contents) Holds(refs reserve.RefSet) bool {
	for _, e := range c.Entries {
		if _, ok := refs.Match(e); ok {
			return true
		}
	}
	return false
}

// Release takes refs out of the object and returns those it held, as
// asked. An entry at a ref's place that is not the ref's entry stays. An
// object that is not writable holds nothing capo may take out.
func (c *Contents) Release(refs reserve.RefSet) []reserve.Ref {
	return c.take(refs, nil)
}

// take removes the entries refs name, handing each to then (nil: none),
// and returns the refs that named them.
func (c *Contents) take(refs reserve.RefSet, then func(reserve.Entry)) []reserve.Ref {
	if !c.Writable() {
		return nil
	}
	var out []reserve.Ref
	for addr, e := range c.Entries {
		if r, ok := refs.Match(e); ok {
			c.remove(addr)
			out = append(out, r)
			if then != nil {
				then(e)
			}
		}
	}
	return out
}

// Stamp sets Seen to at on the refs that have none, and reports whether
// anything changed. Per-node objects keep their format (which has no
// Seen) until the migration moves their entries.
func (c *Contents) Stamp(refs reserve.RefSet, at time.Time) bool {
	if !c.Writable() || c.Legacy() {
		return false
	}
	changed := false
	for _, e := range c.Entries {
		if _, ok := refs.Match(e); ok && e.Seen.IsZero() {
			e.Seen = toSecond(at)
			c.add(e)
			changed = true
		}
	}
	return changed
}

// Retirable reports whether the object may be retired and deleted: it is
// empty, it is not a head that lists overflow objects, and it keeps no
// release by hand in force.
func (c *Contents) Retirable() bool {
	return c.Writable() && len(c.Entries) == 0 && len(c.Overflow) == 0 && len(c.Released) == 0
}

// Unlist takes overflow object i off a head's list.
func (c *Contents) Unlist(i int) bool {
	n := len(c.Overflow)
	c.Overflow = slices.DeleteFunc(c.Overflow, func(x int) bool { return x == i })
	return len(c.Overflow) != n
}

// Relist puts overflow object i on a head's list.
func (c *Contents) Relist(i int) bool {
	if slices.Contains(c.Overflow, i) {
		return false
	}
	c.Overflow = append(c.Overflow, i)
	slices.Sort(c.Overflow)
	return true
}

// Reown gives the StatefulSet entries refs name the owner UID uid: their
// StatefulSet was deleted and re-created under its name, and opts in to
// its members keeping their addresses (the controller decides). It
// reports whether anything changed. Per-node objects keep their format
// until the migration moves their entries.
func (c *Contents) Reown(refs reserve.RefSet, uid string) bool {
	if !c.Writable() || c.Legacy() {
		return false
	}
	changed := false
	for _, e := range c.Entries {
		if _, ok := refs.Match(e); ok && e.OwnerKind != "" && e.OwnerUID != uid {
			e.OwnerUID = uid
			c.add(e)
			changed = true
		}
	}
	return changed
}
