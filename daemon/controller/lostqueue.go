package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/capo-net/capo/pkg/calico/ipam"
	"github.com/capo-net/capo/pkg/reserve"
)

// lostQueue retries the controller's own reservations until written: the
// pod's Delete event does not come again. Work is keyed by node, so the
// pods of a deleted Node become one write.
type lostQueue struct {
	q workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	pending map[string]map[string]reserve.Entry // node -> address -> entry
}

func newLostQueue() *lostQueue {
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second)
	return &lostQueue{
		q:       workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[string]{Name: "capo-lost-pods"}),
		pending: map[string]map[string]reserve.Entry{},
	}
}

func (l *lostQueue) add(lp lostPod) {
	l.mu.Lock()
	m := l.pending[lp.node]
	if m == nil {
		m = map[string]reserve.Entry{}
		l.pending[lp.node] = m
	}
	for _, e := range lp.entries {
		keepLatest(m, e)
	}
	l.mu.Unlock()
	slog.Info("reserving for a pod whose node will not", "pod", lp.pod, "node", lp.node, "reason", lp.entries[0].Reason, "rule", lp.rule)
	l.q.Add(lp.node)
}

// take removes and returns a node's pending entries.
func (l *lostQueue) take(node string) []reserve.Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.pending[node]
	delete(l.pending, node)
	out := make([]reserve.Entry, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	return out
}

// putBack returns entries that were not written, keeping newer ones.
func (l *lostQueue) putBack(node string, entries []reserve.Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.pending[node]
	if m == nil {
		m = map[string]reserve.Entry{}
		l.pending[node] = m
	}
	for _, e := range entries {
		keepLatest(m, e)
	}
}

// keepLatest keeps, of two teardowns of one address, the one seen last: a
// successor's entry replaces its predecessor's, which no longer holds the
// address, whatever order they were queued in.
func keepLatest(m map[string]reserve.Entry, e reserve.Entry) {
	if old, ok := m[e.IP]; !ok || e.ReservedAt.After(old.ReservedAt) {
		m[e.IP] = e
	}
}

// kick retries every pending node now: what held them back (not leading,
// no config) has just changed.
func (l *lostQueue) kick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for node := range l.pending {
		l.q.Forget(node)
		l.q.Add(node)
	}
}

func (l *lostQueue) depth() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.pending {
		n += len(m)
	}
	return n
}

// runLost works the queue until ctx ends. It writes only while this replica
// leads and the operator's config is loaded; until then the work waits.
func (c *coverer) runLost(ctx context.Context) {
	go func() { <-ctx.Done(); c.lost.q.ShutDown() }()
	for {
		node, quit := c.lost.q.Get()
		if quit {
			return
		}
		c.reserveLost(ctx, node)
		c.lost.q.Done(node)
		c.metrics.lostPending.Set(float64(c.lost.depth()))
	}
}

func (c *coverer) reserveLost(ctx context.Context, node string) {
	entries := c.lost.take(node)
	if len(entries) == 0 {
		c.lost.q.Forget(node)
		return
	}
	retry := func(why string, err error) {
		c.lost.putBack(node, entries)
		c.lost.q.AddRateLimited(node)
		if err != nil {
			slog.Error("could not reserve for an uncovered node's pods yet; retrying", "node", node, "why", why, "err", err, "retries", c.lost.q.NumRequeues(node))
		}
	}
	if !c.leading.Load() || !c.config.Loaded() {
		retry("not leading, or the config is not loaded", nil)
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	keep, err := c.stillTheirs(wctx, entries)
	if err != nil {
		retry("reading Calico IPAM", err)
		return
	}
	if len(keep) == 0 {
		c.lost.q.Forget(node)
		return
	}
	res, err := c.store.Reserve(wctx, node, keep)
	if err != nil {
		retry("writing the reservation", err)
		return
	}
	c.lost.q.Forget(node)
	c.metrics.nodeLost.Add(float64(len(res.Added)))
	slog.Info("reserved for pods whose node will not", "node", node, "added", res.Added, "alreadyHeld", res.AlreadyHeld, "releasedByHand", res.Refused)
}

// stillTheirs drops the addresses that must not be reserved now: one Calico
// has given to another pod or to another incarnation of the pod's name, and
// a free one that a reservation holds already (the agent's, or another
// pod's: a second entry would only be a second claim on it).
//
// A free address is reserved, whatever the reason: Calico's GC frees an
// away agent's allocation after its leak grace, which may come before the
// controller sees the agent go (a readiness probe takes its failures to
// fail), and a free, unreserved address is the next pod's. Reserving it a
// second time after its reservation already ended (the agent reserved, and
// the TTL released it before this late write: an evicted pod taken up when
// its node's agent went away days later) is safe: the entry is dated, and
// seen, from the teardown (tornDownAt), not from the write, so the next
// pass releases it again by the TTL that released it before. A successor
// that took the address back holds it in Calico, and is not reserved for;
// a manual release names the entry's place, and ends it again.
func (c *coverer) stillTheirs(ctx context.Context, entries []reserve.Entry) ([]reserve.Entry, error) {
	var keep, free []reserve.Entry
	for _, e := range entries {
		ip, err := netip.ParseAddr(e.IP)
		if err != nil {
			continue
		}
		h, err := ipam.Who(ctx, c.ipam, ip)
		if err != nil {
			return nil, err
		}
		if e.Reason == reserve.ReasonCNIRewrite {
			if e, ok := holdable(e, h); ok {
				keep = append(keep, e)
			} else {
				slog.Info("not holding an address its pod's sandbox no longer has", "ip", e.IP, "pod", e.Namespace+"/"+e.Pod, "sandbox", e.Sandbox)
			}
			continue
		}
		switch {
		case h == nil, h.Cooling: // cooling: released, and free once cooled
			free = append(free, e)
			continue
		case h.Is(e.Namespace, e.Pod):
			var why string
			if e, why = c.ofIncarnation(e, h); why != "" {
				slog.Info("not reserving for an earlier incarnation an address of its pod's name", "ip", e.IP, "pod", e.Namespace+"/"+e.Pod, "podUID", e.PodUID, "handle", h.Handle, "why", why)
				continue
			}
		default:
			slog.Warn("not reserving an address Calico has given to another pod", "ip", e.IP, "pod", e.Namespace+"/"+e.Pod, "now", h.Namespace+"/"+h.Pod)
			continue
		}
		keep = append(keep, e)
	}
	if len(free) == 0 {
		return keep, nil
	}
	unheld, err := c.unreserved(ctx, free)
	if err != nil {
		return nil, err
	}
	return append(keep, unheld...), nil
}

// unreserved are the entries whose address no reservation holds yet, by
// itself or in a CIDR entered by hand.
func (c *coverer) unreserved(ctx context.Context, free []reserve.Entry) ([]reserve.Entry, error) {
	l, err := c.store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the reservations: %w", err)
	}
	var out []reserve.Entry
	for _, e := range free {
		ip, err := netip.ParseAddr(e.IP)
		if err != nil {
			continue
		}
		if h, ok := heldBy(l.Entries, ip.Unmap()); ok {
			slog.Info("not reserving a free address a reservation holds already", "ip", e.IP, "pod", e.Namespace+"/"+e.Pod, "heldFor", h.Namespace+"/"+h.Pod, "heldOn", h.Node)
			continue
		}
		slog.Info("reserving a free, unreserved address of a selected teardown: Calico freed it before the controller saw the node uncovered", "ip", e.IP, "pod", e.Namespace+"/"+e.Pod, "reason", e.Reason, "tornDownAt", e.ReservedAt)
		// Its age counts from the teardown: see stillTheirs.
		e.Seen = e.ReservedAt
		out = append(out, e)
	}
	return out, nil
}

// heldBy is the entry whose address or CIDR holds ip, if any.
func heldBy(entries []reserve.Entry, ip netip.Addr) (reserve.Entry, bool) {
	for _, h := range entries {
		if a, err := netip.ParseAddr(h.IP); err == nil && a.Unmap() == ip {
			return h, true
		}
		if p, err := netip.ParsePrefix(h.IP); err == nil && p.Contains(ip) {
			return h, true
		}
	}
	return reserve.Entry{}, false
}
