package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/failpoint"
	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
)

// pass reads every reservation and has the releaser plan and release
// what is due; the coverer then looks at every node; last the releaser
// hands over re-created sets' reservations and looks after the store
// (upkeep). The coverer's look runs whether or not the release failed.
func (c *Controller) pass(ctx context.Context) error {
	start := c.now()
	defer func() { c.metrics.passSeconds.Observe(c.now().Sub(start).Seconds()) }()
	listing, err := c.store.List(ctx)
	if err != nil {
		return err
	}
	rd, err := c.releaser.release(ctx, listing)
	c.coverer.everyPass()
	if err != nil {
		return err
	}
	failpoint.Hit(failpoint.ControllerReleasePass)
	return c.releaser.settle(ctx, rd)
}

// passRound is one pass's reading, world and plan, from release to settle.
type passRound struct {
	entries  []reserve.Entry
	world    release.World
	plan     []release.Release
	released map[reserve.Ref]bool
	asked    requests // release requests by hand this pass answers
}

// release plans over what List read and applies the plan.
func (rel *releaser) release(ctx context.Context, listing *reserve.Listing) (*passRound, error) {
	rel.reportUnreadable(listing.Unreadable)
	rd := &passRound{entries: listing.Entries, world: rel.caches.world()}
	cfg := rel.config.Get()
	rel.reportUnwatched(rd.entries, rel.watchOwners(&rd.world, cfg.OwnerKinds))
	rel.reportBadTTLs(rel.caches.policy(&rd.world, cfg, rel.owners.policies()))
	rel.recallRecreatable(&rd.world)
	rd.world.Manual, rd.asked = rel.manualRequests(rd.entries)
	t := rel.now()
	judged := rel.judged(rd.entries)
	rd.plan = release.Plan(judged, t, release.Limits{TTL: cfg.IPReserveTime, MaxCount: cfg.IPReserveMaxCount}, rd.world)
	rel.metrics.planSeconds.Observe(rel.now().Sub(t).Seconds())
	rd.plan = rel.confirm(ctx, rd.plan, judged, rd.world, t, cfg)
	var err error
	rd.released, err = rel.apply(ctx, rd.plan)
	rel.gauges(rd.entries, rd.released, cfg.IPReserveMaxCount)
	rel.poolGauges(ctx, rd.entries, rd.released)
	return rd, err
}

// judged are the entries the release rules apply to: all but an agent's
// holds of its running pods' addresses while calico-node is replaced
// (reason cni-rewrite, the pod still running as that incarnation). Those
// are no teardown's: the agent ends them, and they must not count towards
// ipReserveMaxCount, where they would end older teardowns' reservations.
// Once their pod has gone they are judged as any other.
func (rel *releaser) judged(entries []reserve.Entry) []reserve.Entry {
	out := make([]reserve.Entry, 0, len(entries))
	for _, e := range entries {
		if e.Reason == reserve.ReasonCNIRewrite {
			if p := rel.caches.pod(e.Namespace, e.Pod); p != nil && string(p.UID) == e.PodUID && !terminated(p) {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// settle follows a pass whose releases were written: the requests by hand
// answered, re-created StatefulSets' members handed over, the store kept.
func (rel *releaser) settle(ctx context.Context, rd *passRound) error {
	rel.answered(rd.asked)
	if err := rel.reown(ctx, keptOf(rd.entries, rd.plan), rd.world); err != nil {
		return err
	}
	rel.clearManual(ctx, rd.asked.asked)
	return rel.upkeep(ctx, rd.entries, rd.released)
}

// apply releases the plan in one call to the store (one write per object
// it touches), only while this replica leads.
func (rel *releaser) apply(ctx context.Context, plan []release.Release) (map[reserve.Ref]bool, error) {
	released := map[reserve.Ref]bool{}
	if len(plan) == 0 {
		return released, nil
	}
	if !rel.leading.Load() {
		return released, fmt.Errorf("lost the lease before releasing; %d releases left for the next leader", len(plan))
	}
	byRef := make(map[reserve.Ref]release.Release, len(plan))
	for _, r := range plan {
		byRef[r.Ref()] = r
	}
	told := map[reserve.Ref]bool{}
	tell := func(refs []reserve.Ref) { // each as its write lands
		for _, ref := range refs {
			if r, ok := byRef[ref]; ok && !told[ref] {
				told[ref] = true
				rel.released(r)
			}
		}
	}
	done, err := rel.releaseAll(reserve.WithWritten(ctx, tell), plan)
	for _, ref := range done {
		released[ref] = true
	}
	tell(done) // what a store that does not tell by write released
	maybe := maybeWritten(err)
	for _, r := range plan {
		if maybe[r.Ref()] {
			held := rel.now().Sub(release.Since(r.Entry, rel.now())).Round(time.Second).String()
			rel.metrics.releasesInDoubt.WithLabelValues(string(r.Reason)).Inc()
			slog.Warn(MaybeReleased, "ip", r.IP, "node", r.Node, "reason", r.Reason, "pod", r.Namespace+"/"+r.Pod, "sandbox", r.Sandbox, "reservedAs", r.Entry.Reason, "held", held, "err", err)
		}
	}
	if err != nil {
		return released, fmt.Errorf("releasing (%d of %d done): %w", len(done), len(plan), err)
	}
	return released, nil
}

// released counts and tells one release that landed: a log line, and an
// Event on its pod.
func (rel *releaser) released(r release.Release) {
	held := rel.now().Sub(release.Since(r.Entry, rel.now())).Round(time.Second).String()
	rel.metrics.releases.WithLabelValues(string(r.Reason)).Inc()
	slog.Info("released", "ip", r.IP, "node", r.Node, "reason", r.Reason, "pod", r.Namespace+"/"+r.Pod, "sandbox", r.Sandbox, "reservedAs", r.Entry.Reason, "held", held)
	if p := rel.caches.pod(r.Namespace, r.Pod); p != nil && (r.PodUID == "" || string(p.UID) == r.PodUID) {
		rel.recorder.Eventf(p, corev1.EventTypeNormal, "IPReservationReleased", "capo released the reservation of %s (%s)", r.IP, r.Reason)
	}
}

// MaybeReleased is the warning for a release whose write ended without an
// answer (its context ended, its connection dropped): it may have landed,
// and the next pass's List tells. The robustness suite's checker reads it
// as a release, of its reason (test/robust's logs.go).
const MaybeReleased = "release of a reservation may have been written"

// maybeWritten are the refs of a write err leaves in doubt.
func maybeWritten(err error) map[reserve.Ref]bool {
	var m *reserve.MaybeWritten
	if !errors.As(err, &m) {
		return nil
	}
	out := make(map[reserve.Ref]bool, len(m.Refs))
	for _, ref := range m.Refs {
		out[ref] = true
	}
	return out
}

// releaseAll releases the plan: an operator's releases by hand so that
// they stick (the same teardowns are not reserved again), the rest as
// they are.
func (rel *releaser) releaseAll(ctx context.Context, plan []release.Release) ([]reserve.Ref, error) {
	var refs, byHand []reserve.Ref
	for _, r := range plan {
		if r.Reason == release.Manual {
			byHand = append(byHand, r.Ref())
		} else {
			refs = append(refs, r.Ref())
		}
	}
	var done []reserve.Ref
	if len(byHand) > 0 {
		got, err := rel.store.ReleaseByHand(ctx, byHand, rel.now())
		if done = got; err != nil {
			return done, err
		}
	}
	if len(refs) == 0 {
		return done, nil
	}
	got, err := rel.store.Release(ctx, refs)
	return append(done, got...), err
}

// gauges publish what is held after this pass.
func (rel *releaser) gauges(entries []reserve.Entry, released map[reserve.Ref]bool, maxCount int) {
	rel.metrics.reserved.Reset()
	var oldest time.Time
	for _, e := range entries {
		if released[e.Ref()] {
			continue
		}
		reason := e.Reason
		if reason == "" {
			reason = "unknown"
		}
		rel.metrics.reserved.WithLabelValues(e.Node, reason).Inc()
		if since := release.Since(e, rel.now()); oldest.IsZero() || since.Before(oldest) {
			oldest = since
		}
	}
	rel.metrics.maxCount.Set(float64(maxCount))
	if oldest.IsZero() {
		rel.metrics.oldest.Set(0)
	} else {
		rel.metrics.oldest.Set(rel.now().Sub(oldest).Seconds())
	}
}

// keptOf are the entries the plan does not release.
func keptOf(entries []reserve.Entry, plan []release.Release) []reserve.Entry {
	gone := make(map[reserve.Ref]bool, len(plan))
	for _, r := range plan {
		gone[r.Ref()] = true
	}
	var out []reserve.Entry
	for _, e := range entries {
		if !gone[e.Ref()] {
			out = append(out, e)
		}
	}
	return out
}
