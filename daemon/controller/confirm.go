package controller

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
)

// byCache are the reasons judged from the caches' view of a namespace or
// an owner. A watch that stops serving (an API outage, its reflector
// backing off) leaves its cache as it was, and a plan by that view would
// release what the cluster still wants (a StatefulSet scaled up since,
// read as scaled down): such releases are confirmed by live reads first.
var byCache = map[release.Reason]bool{release.OwnerGone: true, release.ScaledDown: true, release.NamespaceGone: true}

// liveReadTimeout bounds one pass's live reads: a release whose read is
// not answered by then is held back to a later pass.
const liveReadTimeout = 10 * time.Second

// Why a release judged by the caches was held back (the metric's cause).
const (
	heldReadFailed = "read-failed" // the live read failed: nothing is known
	heldDisagrees  = "disagrees"   // the API server's copy does not release it so
)

// confirm keeps of plan the releases judged by the caches only where the
// API server agrees: what each depends on is read live, once per
// namespace or owner, its entry planned again in a world that has those
// reads, and a release kept when that plan releases it for the same
// reason. The others are held back, for a later pass to judge again; ttl,
// max-count and manual releases pass as they are.
func (rel *releaser) confirm(ctx context.Context, plan []release.Release, entries []reserve.Entry, w release.World, now time.Time, ttl time.Duration) []release.Release {
	var check []release.Release
	for _, r := range plan {
		if byCache[r.Reason] {
			check = append(check, r)
		}
	}
	if len(check) == 0 {
		return plan
	}
	reads := rel.readAll(ctx, check, w)
	live := livePlan(check, entries, withLive(w, reads), now, ttl)
	var held []heldBack
	for _, r := range check {
		if h, ok := judgeLive(r, subjects(r, w), reads, live[r.Ref()]); !ok {
			held = append(held, h)
		}
	}
	rel.reportHeldBack(held)
	drop := make(map[reserve.Ref]bool, len(held))
	for _, h := range held {
		drop[h.Ref()] = true
	}
	return slices.DeleteFunc(plan, func(r release.Release) bool { return drop[r.Ref()] })
}

// heldBack is a release the live reads did not confirm, and why.
type heldBack struct {
	release.Release
	key  liveKey        // the read that failed, or whose answer disagrees
	err  error          // the read's error; nil when it answered otherwise
	live release.Reason // what the live plan releases it for; "" kept
}

// judgeLive confirms r when every read it depends on answered and the
// live plan released it for r's reason.
func judgeLive(r release.Release, keys []liveKey, reads map[liveKey]liveState, live release.Reason) (heldBack, bool) {
	for _, k := range keys {
		if err := reads[k].err; err != nil {
			return heldBack{Release: r, key: k, err: err}, false
		}
	}
	return heldBack{Release: r, key: keys[0], live: live}, live == r.Reason
}

// subjects are the reads r depends on: its namespace, or its owner. An
// entry judged an apps/v1 set's may be one of a kind beyond apps/v1 with
// stable names, written before capo told kinds apart by group (release's
// ownerKindOf): those kinds' owners of its name are read too.
func subjects(r release.Release, w release.World) []liveKey {
	if r.Reason == release.NamespaceGone {
		return []liveKey{{namespace: r.Namespace}}
	}
	out := []liveKey{{owner: release.OwnerKey{Kind: r.OwnerKind, Namespace: r.Namespace, Name: r.OwnerName}}}
	if r.OwnerKind == "StatefulSet" && r.OwnerUID != "" {
		for _, kind := range slices.Sorted(maps.Keys(w.StableKinds)) {
			out = append(out, liveKey{owner: release.OwnerKey{Kind: kind, Namespace: r.Namespace, Name: r.OwnerName}})
		}
	}
	return out
}

// readAll reads every subject of check once, within liveReadTimeout.
func (rel *releaser) readAll(ctx context.Context, check []release.Release, w release.World) map[liveKey]liveState {
	ctx, cancel := context.WithTimeout(ctx, liveReadTimeout)
	defer cancel()
	reads := map[liveKey]liveState{}
	for _, r := range check {
		for _, k := range subjects(r, w) {
			if _, done := reads[k]; !done {
				reads[k] = rel.readLive(ctx, k)
			}
		}
	}
	return reads
}

// withLive is w with what the reads answered in place of the caches'.
func withLive(w release.World, reads map[liveKey]liveState) release.World {
	lw := w
	lw.Namespaces, lw.Owners, lw.RecreateSets = maps.Clone(w.Namespaces), maps.Clone(w.Owners), maps.Clone(w.RecreateSets)
	if lw.Owners == nil {
		lw.Owners = map[release.OwnerKey]release.Owner{}
	}
	if lw.RecreateSets == nil {
		lw.RecreateSets = map[release.OwnerKey]bool{}
	}
	for k, s := range reads {
		switch {
		case s.err != nil:
		case k.owner == (release.OwnerKey{}):
			// Read for a namespace-gone release only, which the caches
			// judge where lw.Namespaces is not nil.
			if s.live {
				lw.Namespaces[k.namespace] = true
			} else {
				delete(lw.Namespaces, k.namespace)
			}
		default:
			if s.live {
				lw.Owners[k.owner] = s.owner
			} else {
				delete(lw.Owners, k.owner)
			}
			// As the caches' policy and recallRecreatable: an opt-in
			// counts, being deleted or not; a live owner without one ends
			// what was remembered.
			if s.recreate {
				lw.RecreateSets[k.owner] = true
			} else if s.live {
				delete(lw.RecreateSets, k.owner)
			}
		}
	}
	return lw
}

// livePlan plans check's entries again in the live world lw: by ref, the
// reason each is released for. Max count is left out: it was counted over
// every entry, by the plan being confirmed.
func livePlan(check []release.Release, entries []reserve.Entry, lw release.World, now time.Time, ttl time.Duration) map[reserve.Ref]release.Reason {
	want := make(map[reserve.Ref]bool, len(check))
	for _, r := range check {
		want[r.Ref()] = true
	}
	var es []reserve.Entry
	for _, e := range entries {
		if want[e.Ref()] {
			es = append(es, e)
		}
	}
	out := map[reserve.Ref]release.Reason{}
	for _, r := range release.Plan(es, now, release.Limits{TTL: ttl, MaxCount: len(es)}, lw) {
		out[r.Ref()] = r.Reason
	}
	return out
}

// reportHeldBack counts every release held back and warns once per owner
// (or namespace) and reason, again when why or what it holds changes.
func (rel *releaser) reportHeldBack(held []heldBack) {
	type group struct {
		owner, reason, why string
		ips                []string
	}
	groups := map[string]*group{}
	var order []string
	for _, h := range held {
		cause, why := heldDisagrees, "the API server's copy keeps it"
		switch {
		case h.err != nil:
			cause, why = heldReadFailed, "reading it failed: "+h.err.Error()
		case h.live != "":
			why = "the API server's copy releases it as " + string(h.live)
		}
		rel.metrics.heldBack.WithLabelValues(string(h.Reason), cause).Inc()
		id := h.key.String() + "\x00" + string(h.Reason) + "\x00" + why
		g := groups[id]
		if g == nil {
			g = &group{owner: h.key.String(), reason: string(h.Reason), why: why}
			groups[id] = g
			order = append(order, id)
		}
		g.ips = append(g.ips, h.IP+" "+h.Namespace+"/"+h.Pod)
	}
	told := map[string]string{}
	for _, id := range order {
		g := groups[id]
		told[id] = listed(g.ips, 10)
		if rel.heldTold[id] == told[id] {
			continue
		}
		slog.Warn("releases judged by the cache held back: the API server's copy of their owner or namespace says otherwise, or could not be read; judged again next pass",
			"owner", g.owner, "reason", g.reason, "why", g.why, "count", len(g.ips), "reservations", told[id])
	}
	rel.heldTold = told
}

// listed joins the first n of xs, and says how many more there are.
func listed(xs []string, n int) string {
	if len(xs) <= n {
		return strings.Join(xs, ", ")
	}
	return strings.Join(xs[:n], ", ") + fmt.Sprintf(" and %d more", len(xs)-n)
}
