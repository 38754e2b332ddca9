package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/selection"
)

// ReleaseAnnotation on a Node asks the controller to release reservations
// by hand: "all" (every address held for that node), a comma-separated list
// of addresses, or "pod=<namespace>/<name>". The controller removes the
// annotation once done.
const ReleaseAnnotation = "capo.io/release"

// pass reads every reservation, plans, and releases what is due.
func (c *Controller) pass(ctx context.Context) error {
	start := c.now()
	defer func() { c.metrics.passSeconds.Observe(c.now().Sub(start).Seconds()) }()
	entries, err := c.store.List(ctx)
	if err != nil {
		return err
	}
	cfg := c.config.Get()
	w := c.caches.world()
	var asked []string // nodes whose release annotation this pass answers
	w.Manual, asked = c.manualRequests(entries)
	t := c.now()
	plan := release.Plan(entries, t, release.Limits{TTL: cfg.IPReserveTime, MaxCount: cfg.IPReserveMaxCount}, w)
	c.metrics.planSeconds.Observe(c.now().Sub(t).Seconds())
	released, err := c.apply(ctx, plan)
	c.gauges(entries, released, cfg.IPReserveMaxCount)
	c.countLostNodes()
	c.watchAway()
	c.pruneDeletedNodes()
	if err != nil {
		return err
	}
	for _, node := range asked {
		c.clearManual(ctx, node)
	}
	return nil
}

// apply releases the plan node by node, only while this replica leads.
func (c *Controller) apply(ctx context.Context, plan []release.Release) (map[string]bool, error) {
	byNode := map[string][]release.Release{}
	for _, r := range plan {
		byNode[r.Node] = append(byNode[r.Node], r)
	}
	released := map[string]bool{}
	var errs []error
	for node, rs := range byNode {
		if !c.leading.Load() {
			return released, fmt.Errorf("lost the lease mid-pass; %d nodes left for the next leader", len(byNode))
		}
		ips := make([]string, 0, len(rs))
		for _, r := range rs {
			ips = append(ips, r.IP)
		}
		done, err := c.store.Release(ctx, node, ips)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", node, err))
			continue
		}
		for _, r := range rs {
			if !slices.Contains(done, r.IP) {
				continue // already gone: someone else released it
			}
			released[r.IP] = true
			c.metrics.releases.WithLabelValues(string(r.Reason)).Inc()
			slog.Info("released", "ip", r.IP, "node", node, "reason", r.Reason, "pod", r.Namespace+"/"+r.Pod, "held", c.now().Sub(r.ReservedAt).Round(time.Second))
			if p := c.caches.pod(r.Namespace, r.Pod); p != nil && (r.PodUID == "" || string(p.UID) == r.PodUID) {
				c.recorder.Eventf(p, corev1.EventTypeNormal, "IPReservationReleased", "capo released the reservation of %s (%s)", r.IP, r.Reason)
			}
		}
	}
	if len(errs) > 0 {
		return released, fmt.Errorf("releasing: %v", errs)
	}
	return released, nil
}

// gauges publish what is held after this pass.
func (c *Controller) gauges(entries []reserve.Entry, released map[string]bool, maxCount int) {
	c.metrics.reserved.Reset()
	var oldest time.Time
	for _, e := range entries {
		if released[e.IP] {
			continue
		}
		reason := e.Reason
		if reason == "" {
			reason = "unknown"
		}
		c.metrics.reserved.WithLabelValues(e.Node, reason).Inc()
		if oldest.IsZero() || e.ReservedAt.Before(oldest) {
			oldest = e.ReservedAt
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
	for _, o := range c.caches.nodes.GetStore().List() {
		node := o.(*corev1.Node)
		if selection.NodeOptedIn(selection.Of(node)) && nodeLost(node) {
			n++
		}
	}
	c.metrics.lostNodes.Set(float64(n))
}

// manualRequests turns the nodes' release annotations into addresses. A
// request that matches nothing is said on the node (an Event), not dropped
// in silence: the operator may have mistyped an address.
func (c *Controller) manualRequests(entries []reserve.Entry) (map[string]bool, []string) {
	manual := map[string]bool{}
	var nodes []string
	for _, o := range c.caches.nodes.GetStore().List() {
		n := o.(*corev1.Node)
		v, ok := n.Annotations[ReleaseAnnotation]
		if !ok {
			continue
		}
		nodes = append(nodes, n.Name)
		matched := 0
		for _, e := range entries {
			if e.Node == n.Name && matchesManual(v, e) {
				manual[e.IP] = true
				matched++
			}
		}
		if matched == 0 {
			c.recorder.Eventf(n, corev1.EventTypeWarning, "ReleaseMatchedNothing", "%s=%q matches no address capo holds for this node; see kubectl capo list --node %s", ReleaseAnnotation, v, n.Name)
			slog.Warn("a release by hand matched nothing", "node", n.Name, "request", v)
		}
	}
	return manual, nodes
}

// matchesManual: "all", "pod=<namespace>/<name>", or addresses (any
// spelling: fd00:0::1, FD00::1 and fd00::1/128 are one address).
func matchesManual(v string, e reserve.Entry) bool {
	v = strings.TrimSpace(v)
	switch {
	case v == "all":
		return true
	case strings.HasPrefix(v, "pod="):
		return strings.TrimPrefix(v, "pod=") == e.Namespace+"/"+e.Pod
	}
	held, ok := parseAddr(e.IP)
	for _, s := range strings.Split(v, ",") {
		if want, okw := parseAddr(s); ok && okw && want == held {
			return true
		}
		if strings.TrimSpace(s) == e.IP { // a CIDR wider than one address, as held
			return true
		}
	}
	return false
}

// parseAddr reads an address, or a single-address CIDR, in any spelling.
func parseAddr(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr().Unmap(), p.IsSingleIP()
	}
	a, err := netip.ParseAddr(s)
	return a.Unmap(), err == nil
}

func (c *Controller) clearManual(ctx context.Context, node string) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{ReleaseAnnotation: nil}}})
	if _, err := c.kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		slog.Warn("could not clear the release annotation", "node", node, "err", err)
	}
}
