package robust

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
)

// passLag is how long before its release a pass's List of the
// reservations may have been read: its live reads may take the
// controller's liveReadTimeout (10 s), and its writes their own time.
const passLag = 15 * time.Second

// cacheLag is how stale a view of the cluster a release may act on: the
// controller's informers follow the API server a moment behind.
const cacheLag = 3 * time.Second

// judgeRelease holds a release capo made to the fifth invariant: its
// reason was true when it was made.
func (k *checker) judgeRelease(ix *index, r Event) {
	if ns, _, _ := strings.Cut(r.Pod, "/"); ns != k.ns {
		k.unchecked["of another run's pod"]++ // its history is not this run's
		return
	}
	ip, t := firstIP(r.IPs), r.Start
	e, sampled := k.entryFor(r.Node, ip, r.Pod, r.Sandbox, r.Value, t)
	o := ix.owed(ip, r.Pod, t)
	var seen, written time.Time // when the controller first saw it; when it was written
	switch {
	case sampled:
		seen, written = e.Seen, e.ReservedAt
	case o != nil:
		written = o.open // the teardown began: no reservation of it is older
	}
	if seen.IsZero() {
		seen = written // the controller's age counts from its first sight, no sooner
	}
	ok, why := k.reasonHeld(ix, r, e, o, seen, written)
	if why == "" {
		return
	}
	if !ok {
		k.violate(vUnjustified, fmt.Sprintf("%d", r.Seq), t, fmt.Sprintf("%s released %s of %s on %s as %q, but %s", strings.TrimPrefix(r.Detail, "by "), ip, r.Pod, r.Node, r.Reason, why))
	}
}

// reasonHeld says whether r's reason held; why says what was checked
// ("" when nothing could be: counted as unchecked).
func (k *checker) reasonHeld(ix *index, r Event, e reserve.Entry, o *obligation, seen, written time.Time) (bool, string) {
	t := r.Start
	set, ord, member := ordinal(r.Pod)
	owner := e.OwnerUID
	if owner == "" && o != nil {
		owner = o.owner
	}
	switch release.Reason(r.Reason) {
	case release.TTL:
		if seen.IsZero() {
			return k.skip(r)
		}
		ttl := ix.ttlAt(set, t, k.cfg.TTL)
		return !t.Add(logSlack).Before(seen.Add(ttl)), fmt.Sprintf("it was held from %s, under %s, less than its reservation time %s", k.hist.At(seen), t.Sub(seen).Round(time.Millisecond), ttl)
	case release.MaxCount:
		n, sampled := k.maxHeld(ix, t.Add(-passLag), t)
		if !sampled {
			return k.skip(r)
		}
		return n > k.cfg.MaxCount, fmt.Sprintf("at most %d can have been held in the %s before, ipReserveMaxCount %d", n, passLag, k.cfg.MaxCount)
	case release.ScaledDown:
		if !member {
			return k.skip(r)
		}
		n := ix.fewestReplicas(set, t.Add(-cacheLag), t)
		return n <= ord, fmt.Sprintf("%s had %d replicas from %s on, ordinal %d among them", set, n, k.hist.At(t.Add(-cacheLag)), ord)
	case release.OwnerGone:
		if owner == "" {
			return k.skip(r)
		}
		return ix.setDeletedBy(owner, t.Add(logSlack)), fmt.Sprintf("its StatefulSet (UID %s) was not deleted", owner)
	case release.Manual:
		return ix.askedFor(r, written), "no release by hand asked for it while it was held"
	case "returned":
		return ix.gotBack(r.Pod, firstIP(r.IPs), t), "the pod never got the address back"
	}
	return false, "no such reason"
}

// sameSandbox says whether an entry's sandbox is a release's: either may
// be shortened; none is only none.
func sameSandbox(entry, released string) bool {
	if entry == "" || released == "" {
		return entry == released
	}
	return strings.HasPrefix(entry, released) || strings.HasPrefix(released, entry)
}

func (k *checker) skip(r Event) (bool, string) {
	k.unchecked[r.Reason]++
	return true, ""
}

// entryFor is the reservation of ip on node for pod, of the released
// sandbox and reason (reservedAs, where the release says it), that a
// sample saw before t (so it existed then), as it was then: the latest
// written. The
// sandbox and the reason tell apart reservations of one address: the
// agent's of a teardown, and the controller's coverage (dated from its
// teardown) of the same or an earlier one.
func (k *checker) entryFor(node, ip, pod, sandbox, reason string, t time.Time) (reserve.Entry, bool) {
	var best *reserve.Entry
	for _, s := range k.entries {
		e := s.asOf(t)
		if e.Node == node && e.IP == ip && e.Namespace+"/"+e.Pod == pod && sameSandbox(e.Sandbox, sandbox) && (reason == "" || e.Reason == reason) && !s.first.After(t) {
			if best == nil || e.ReservedAt.After(best.ReservedAt) {
				best = &e
			}
		}
	}
	if best == nil {
		return reserve.Entry{}, false
	}
	return *best, true
}

// maxHeld is the most reservations there can have been at an instant of
// [from, to]: from each sample on, its count and what the sets' members'
// teardowns could have added (a DEL, a deletion, an eviction: each may add
// a reservation, by the node's agent, its hold while calico-node is
// replaced, or the controller's coverage) until the next sample, whose
// count then stands. Between two samples a burst of teardowns and returns
// can rise and fall unseen, and the controller's List may fall there.
func (k *checker) maxHeld(ix *index, from, to time.Time) (int, bool) {
	n, sampled := 0, false
	for i, c := range k.counts {
		if c.at.Before(from) || c.at.After(to) {
			continue
		}
		until := to
		if i+1 < len(k.counts) {
			until = k.counts[i+1].at
		}
		n, sampled = max(n, c.n+ix.teardowns(k.cfg.Sets, c.from, until)), true
	}
	return n, sampled
}

// teardowns counts the events of the sets' members in (from, to] that may
// reserve an address.
func (ix *index) teardowns(sets []string, from, to time.Time) int {
	n := 0
	for _, e := range ix.evs {
		if e.Start.After(to) {
			break
		}
		if !e.Start.After(from) || e.Op != opDel && e.Op != opDeletePod && e.Op != opEvict {
			continue
		}
		if set, _, ok := ordinal(e.Pod); ok && slices.Contains(sets, set) {
			n++
		}
	}
	return n
}

// owed is the last obligation of ip to pod that opened by t.
func (ix *index) owed(ip, pod string, t time.Time) *obligation {
	var last *obligation
	for _, o := range ix.oblig[ip] {
		if o.pod == pod && !o.open.After(t) {
			last = o
		}
	}
	return last
}

// ttlAt is the shortest reservation time set's members had in the
// cacheLag before t: the set's own annotation, else ipReserveTime.
func (ix *index) ttlAt(set string, t time.Time, global time.Duration) time.Duration {
	return time.Duration(ix.least(t.Add(-cacheLag), t, int64(global), func(e Event) (int64, bool) {
		if e.Value != set || e.Op != opSetTTL && e.Op != opCreateSet || e.Err != "" {
			return 0, false
		}
		if v, ok := strings.CutPrefix(e.Detail, "ttl="); ok {
			if d, err := release.ParseTTL(v); err == nil {
				return int64(d), true
			}
		}
		return int64(global), true // none, or one capo ignores
	}))
}

// fewestReplicas is the fewest replicas set had in [from, to].
func (ix *index) fewestReplicas(set string, from, to time.Time) int {
	return int(ix.least(from, to, 0, func(e Event) (int64, bool) {
		return int64(e.N), e.Value == set && (e.Op == opScale || e.Op == opCreateSet) && e.Err == ""
	}))
}

// least is the least value a setting had over [from, to]: value says
// what an event sets it to (false: the event does not touch it); it was
// initial before any.
func (ix *index) least(from, to time.Time, initial int64, value func(Event) (int64, bool)) int64 {
	cur, least := initial, int64(-1)
	for _, e := range ix.evs {
		if e.Start.After(to) {
			break
		}
		v, ok := value(e)
		if !ok {
			continue
		}
		if e.Start.After(from) && least < 0 {
			least = cur // what it was as the window opened
		}
		cur = v
		if least >= 0 {
			least = min(least, cur)
		}
	}
	if least < 0 {
		return cur
	}
	return least
}

// setDeletedBy: the StatefulSet of that UID was deleted by t.
func (ix *index) setDeletedBy(uid string, t time.Time) bool {
	for _, e := range ix.evs {
		if e.Op == opDeleteSet && e.Owner == uid && !e.Start.After(t) {
			return true
		}
	}
	return false
}

// askedFor: a release by hand for r's node named its address, its pod or
// all, and was asked before r, once the reservation was written: by the
// controller's first look at the request, a pass (ipReleasePeriod, 1 s)
// after it at most; entries are stamped to the second.
func (ix *index) askedFor(r Event, written time.Time) bool {
	for _, e := range ix.evs {
		if e.Op != opAskRelease || e.Node != r.Node || e.Start.After(r.Start) || !written.IsZero() && written.After(e.End.Add(time.Second+logSlack)) {
			continue
		}
		if v := e.Value; v == "all" || v == "pod="+r.Pod || v == firstIP(r.IPs) {
			return true
		}
	}
	return false
}

// gotBack: pod had ip back from an ADD that began by t.
func (ix *index) gotBack(pod, ip string, t time.Time) bool {
	for _, a := range ix.adds[ip] {
		if a.Pod == pod && !a.Start.After(t.Add(logSlack)) {
			return true
		}
	}
	return false
}
