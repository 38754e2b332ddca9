package controller

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
)

// byCache are the reasons judged from the caches' view of a namespace,
// an owner, or the policy their annotations set. A watch that stops
// serving (an API outage, its reflector backing off) leaves its cache as
// it was, and a plan by that view would release what the cluster still
// wants (a StatefulSet scaled up since, read as scaled down; a
// reservation time lengthened since, read as the old one): such releases
// are confirmed by live reads first.
var byCache = map[release.Reason]bool{release.OwnerGone: true, release.ScaledDown: true, release.NamespaceGone: true, release.TTL: true}

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
// namespace, owner or pod, its entry planned again in a world that has
// those reads, and a release kept when that plan releases it for the same
// reason. The others are held back, for a later pass to judge again;
// max-count and manual releases pass as they are.
func (rel *releaser) confirm(ctx context.Context, plan []release.Release, entries []reserve.Entry, w release.World, now time.Time, cfg *config.Config) []release.Release {
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
	live := livePlan(check, entries, withLive(w, reads, policyTTL(cfg)), now, cfg.IPReserveTime)
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

// policyTTL reads a live object's TTLAnnotation as the caches' policy
// does: valid, cut to maxIPReserveTime; an invalid one is none (the
// policy reports it).
func policyTTL(cfg *config.Config) func(ann map[string]string) (time.Duration, bool) {
	return func(ann map[string]string) (d time.Duration, ok bool) {
		r := &policyReader{cfg: cfg}
		r.ttl(nil, "", ann, func(v time.Duration) { d, ok = v, true })
		return d, ok
	}
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

// subjects are the reads r depends on: its namespace, or its owner; for
// a ttl release, what can set its reservation time: its pod (by name),
// its owner where the caches' policy reads one of its kind, and its
// namespace. An entry judged an apps/v1 set's may be one of a kind beyond
// apps/v1 with stable names, written before capo told kinds apart by
// group (release's ownerKindOf): those kinds' owners of its name are read
// too.
func subjects(r release.Release, w release.World) []liveKey {
	switch r.Reason {
	case release.NamespaceGone:
		return []liveKey{{namespace: r.Namespace}}
	case release.TTL:
		out := []liveKey{{namespace: r.Namespace, pod: r.Pod}}
		if r.OwnerKind != "" && w.TrackedKinds[r.OwnerKind] {
			out = append(out, liveKey{owner: release.OwnerKey{Kind: r.OwnerKind, Namespace: r.Namespace, Name: r.OwnerName}})
		}
		return append(out, liveKey{namespace: r.Namespace})
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

// withLive is w with what the reads answered in place of the caches':
// namespaces and owners, and the reservation times their annotations,
// and pods', set (ttlOf reads one).
func withLive(w release.World, reads map[liveKey]liveState, ttlOf func(map[string]string) (time.Duration, bool)) release.World {
	lw := w
	lw.Namespaces, lw.Owners, lw.RecreateSets = maps.Clone(w.Namespaces), maps.Clone(w.Owners), maps.Clone(w.RecreateSets)
	if lw.Owners == nil {
		lw.Owners = map[release.OwnerKey]release.Owner{}
	}
	if lw.RecreateSets == nil {
		lw.RecreateSets = map[release.OwnerKey]bool{}
	}
	lw.TTLs = release.TTLs{Pods: maps.Clone(w.TTLs.Pods), Sets: maps.Clone(w.TTLs.Sets), Namespaces: maps.Clone(w.TTLs.Namespaces)}
	if lw.TTLs.Pods == nil {
		lw.TTLs.Pods = map[string]time.Duration{}
	}
	if lw.TTLs.Sets == nil {
		lw.TTLs.Sets = map[release.OwnerKey]time.Duration{}
	}
	if lw.TTLs.Namespaces == nil {
		lw.TTLs.Namespaces = map[string]time.Duration{}
	}
	for k, s := range reads {
		if s.err != nil {
			continue
		}
		ttl, hasTTL := ttlOf(s.annotations)
		switch {
		case k.pod != "":
			setOrDelete(lw.TTLs.Pods, k.namespace+"/"+k.pod, ttl, hasTTL)
		case k.owner == (release.OwnerKey{}):
			setOrDelete(lw.TTLs.Namespaces, k.namespace, ttl, hasTTL)
			// The caches judge namespaces gone only where lw.Namespaces
			// is not nil.
			if lw.Namespaces == nil {
				break
			}
			if s.live {
				lw.Namespaces[k.namespace] = true
			} else {
				delete(lw.Namespaces, k.namespace)
			}
		default:
			setOrDelete(lw.TTLs.Sets, k.owner, ttl, hasTTL)
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

func setOrDelete[K comparable](m map[K]time.Duration, k K, d time.Duration, set bool) {
	if set {
		m[k] = d
	} else {
		delete(m, k)
	}
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
		slog.Warn("releases judged by the cache held back: the API server's copy of their owner, namespace or pod says otherwise, or could not be read; judged again next pass",
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
