package layout

import (
	"maps"
	"slices"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

// An operator's release must stick: the controller covering a pod that
// goes on terminating, or a journal replayed after the agent was away,
// would otherwise reserve the very teardown again. So a release by hand
// leaves a mark in the object it released from, in ReleasedAnnotation
// (its own annotation: Calico never reads it, and capo releases that
// predate it keep it as they keep any annotation they do not own): the
// teardown's record, Seen set to when it was released. Reserve refuses
// that teardown at that place (reserve.SameTeardown) while the mark lasts
// (reserve.ReleasedByHandKept). An object that holds marks is not deleted
// before they expire.

// maxReleased bounds the marks one object keeps, the oldest dropped first.
const maxReleased = 200

// ReleaseByHand is Release that marks what it takes out as released by
// hand at at. Per-node objects, which the migration empties, keep no
// marks; nor does an agent's hold while calico-node is replaced
// (reserve.ReasonCNIRewrite): it was made for a pod that had its address,
// ahead of any teardown, so a mark of it would stand for the pod's next
// teardown, which nobody released (an operator releasing "db-0's
// address" just after db-0 got it back would have its next DEL reserve
// nothing). Its teardown is reserved as any other.
func (c *Contents) ReleaseByHand(refs reserve.RefSet, at time.Time) []reserve.Ref {
	return c.take(refs, func(e reserve.Entry) {
		if !c.Legacy() && e.Reason != reserve.ReasonCNIRewrite && (e.Sandbox != "" || e.PodUID != "") {
			e.Seen = toSecond(at)
			c.mark(e)
		}
	})
}

func (c *Contents) mark(e reserve.Entry) {
	if c.Released == nil {
		c.Released = map[string]reserve.Entry{}
	}
	c.Released[e.IP] = e
	if len(c.Released) <= maxReleased {
		return
	}
	oldest := slices.MinFunc(slices.Collect(maps.Values(c.Released)), func(a, b reserve.Entry) int { return a.Seen.Compare(b.Seen) })
	delete(c.Released, oldest.IP)
}

// Expire drops the marks older than reserve.ReleasedByHandKept at now,
// and reports whether it dropped any.
func (c *Contents) Expire(now time.Time) bool {
	if !c.Writable() {
		return false
	}
	n := len(c.Released)
	maps.DeleteFunc(c.Released, func(_ string, e reserve.Entry) bool { return expired(e, now) })
	return len(c.Released) != n
}

// Expirable reports whether the object holds marks Expire would drop.
func (c *Contents) Expirable(now time.Time) bool {
	for _, e := range c.Released {
		if expired(e, now) {
			return true
		}
	}
	return false
}

func expired(mark reserve.Entry, now time.Time) bool {
	return now.Sub(mark.Seen) >= reserve.ReleasedByHandKept
}

// Expire drops the marks of every object of the bucket older than
// reserve.ReleasedByHandKept at now: a Place then refuses only the
// teardowns still released, and writes what it changes without the rest.
func (b *Bucket) Expire(now time.Time) {
	for _, c := range b.objects() {
		c.Expire(now)
	}
}

// releasedByHand reports whether a mark in the bucket says e's teardown
// was released by hand.
func (b *Bucket) releasedByHand(e reserve.Entry) bool {
	for _, c := range b.objects() {
		if m, ok := c.Released[e.IP]; ok && reserve.SameTeardown(m, e) {
			return true
		}
	}
	return false
}

// decodeReleased reads the marks of a bucket object. Marks that do not
// parse are dropped: a mark only keeps a teardown from being reserved
// again, so losing one loses no reservation.
func (c *Contents) decodeReleased(ann string) {
	if ann == "" || c.Legacy() {
		return
	}
	marks, _, err := parseRecords(ann)
	if err != nil {
		return
	}
	for _, m := range marks {
		if addr, err := reserve.NormalizeAddr(m.IP); err == nil && m.Node != "" {
			m.IP = addr
			c.mark(m)
		}
	}
}

// encodeReleased renders the marks, or "" for none.
func (c *Contents) encodeReleased() string {
	if len(c.Released) == 0 {
		return ""
	}
	marks := slices.Collect(maps.Values(c.Released))
	slices.SortFunc(marks, func(a, b reserve.Entry) int { return reserve.CompareAddr(a.IP, b.IP) })
	return encodeRecords(marks)
}
