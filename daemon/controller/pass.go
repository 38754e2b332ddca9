package controller

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/selection"
)

// pass reads every reservation, plans, releases what is due, and then
// looks after the store (upkeep).
func (c *Controller) pass(ctx context.Context) error {
	start := c.now()
	defer func() { c.metrics.passSeconds.Observe(c.now().Sub(start).Seconds()) }()
	listing, err := c.store.List(ctx)
	if err != nil {
		return err
	}
	c.reportUnreadable(listing.Unreadable)
	entries := listing.Entries
	cfg := c.config.Get()
	w := c.caches.world()
	c.reportUnwatched(entries, c.watchOwners(&w, cfg.OwnerKinds))
	c.reportBadTTLs(c.caches.policy(&w))
	c.recallRecreatable(&w)
	var asked []request // release requests by hand this pass answers
	w.Manual, asked = c.manualRequests(entries)
	t := c.now()
	plan := release.Plan(entries, t, release.Limits{TTL: cfg.IPReserveTime, MaxCount: cfg.IPReserveMaxCount}, w)
	c.metrics.planSeconds.Observe(c.now().Sub(t).Seconds())
	released, err := c.apply(ctx, plan)
	c.gauges(entries, released, cfg.IPReserveMaxCount)
	c.poolGauges(ctx, entries, released)
	c.countLostNodes()
	c.watchAway()
	c.watchCoverage()
	c.pruneDeletedNodes()
	if err != nil {
		return err
	}
	if err := c.reown(ctx, keptOf(entries, plan), w); err != nil {
		return err
	}
	c.clearManual(ctx, asked)
	return c.upkeep(ctx, entries, released)
}

// apply releases the plan in one call to the store (one write per object
// it touches), only while this replica leads.
func (c *Controller) apply(ctx context.Context, plan []release.Release) (map[reserve.Ref]bool, error) {
	released := map[reserve.Ref]bool{}
	if len(plan) == 0 {
		return released, nil
	}
	if !c.leading.Load() {
		return released, fmt.Errorf("lost the lease before releasing; %d releases left for the next leader", len(plan))
	}
	refs := make([]reserve.Ref, 0, len(plan))
	for _, r := range plan {
		refs = append(refs, r.Ref())
	}
	done, err := c.store.Release(ctx, refs)
	for _, ref := range done {
		released[ref] = true
	}
	for _, r := range plan {
		if !released[r.Ref()] {
			continue // already gone (someone else released it), or not reached
		}
		c.metrics.releases.WithLabelValues(string(r.Reason)).Inc()
		slog.Info("released", "ip", r.IP, "node", r.Node, "reason", r.Reason, "pod", r.Namespace+"/"+r.Pod, "held", c.now().Sub(release.Since(r.Entry, c.now())).Round(time.Second).String())
		if p := c.caches.pod(r.Namespace, r.Pod); p != nil && (r.PodUID == "" || string(p.UID) == r.PodUID) {
			c.recorder.Eventf(p, corev1.EventTypeNormal, "IPReservationReleased", "capo released the reservation of %s (%s)", r.IP, r.Reason)
		}
	}
	if err != nil {
		return released, fmt.Errorf("releasing (%d of %d done): %w", len(done), len(plan), err)
	}
	return released, nil
}

// gauges publish what is held after this pass.
func (c *Controller) gauges(entries []reserve.Entry, released map[reserve.Ref]bool, maxCount int) {
	c.metrics.reserved.Reset()
	var oldest time.Time
	for _, e := range entries {
		if released[e.Ref()] {
			continue
		}
		reason := e.Reason
		if reason == "" {
			reason = "unknown"
		}
		c.metrics.reserved.WithLabelValues(e.Node, reason).Inc()
		if since := release.Since(e, c.now()); oldest.IsZero() || since.Before(oldest) {
			oldest = since
		}
	}
	c.metrics.maxCount.Set(float64(maxCount))
	if oldest.IsZero() {
		c.metrics.oldest.Set(0)
	} else {
		c.metrics.oldest.Set(c.now().Sub(oldest).Seconds())
	}
}

func (c *Controller) countLostNodes() {
	n := 0
	for _, node := range kubeclient.Listed[corev1.Node](c.caches.nodes.GetStore().List()) {
		if selection.NodeOptedIn(selection.Of(node)) && nodeLost(node) {
			n++
		}
	}
	c.metrics.lostNodes.Set(float64(n))
}

// matchesManual: "all", "pod=<namespace>/<name>", or addresses (any
// spelling: fd00:0::1, FD00::1 and fd00::1/128 are one address; a wider
// CIDR held as added by hand is named by itself).
func matchesManual(v string, e reserve.Entry) bool {
	v = strings.TrimSpace(v)
	switch {
	case v == "all":
		return true
	case strings.HasPrefix(v, "pod="):
		return strings.TrimPrefix(v, "pod=") == e.Namespace+"/"+e.Pod
	}
	for _, ip := range strings.Split(v, ",") {
		// As values: "fd00:0::1" and "fd00::1/128" name the held fd00::1.
		if addr, err := reserve.NormalizeAddr(ip); err == nil && addr == e.IP {
			return true
		}
	}
	return false
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
