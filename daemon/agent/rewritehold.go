package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/calico/ipam"
	"github.com/capo-net/capo/pkg/caliconode"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/returns"
	"github.com/capo-net/capo/pkg/selection"
)

// rewriteHold holds this node's selected pods' addresses while calico-node
// is replaced, and lets go of them once capo is back (package caliconode
// tells why).
type rewriteHold struct {
	node      string
	window    *caliconode.Window
	cluster   Cluster
	cachedPod func(namespace, name string) *corev1.Pod
	selectors func() []selection.Selector
	reserve   Reserver      // holds join the node's teardowns' writes
	store     reserve.Store // lists and ends them
	ipam      ipam.Reader
	records   func() ([]*journal.AddrRecord, error) // capo-ipam's ADD records
	installed func() bool                           // capo-ipam is in the CNI chain
	guard     *addrGuard
	held      func([]reserve.Entry) // told of the holds written
	metrics   *metrics
	timeout   func() time.Duration
	now       func() time.Time
	every     time.Duration // how often the window is looked at besides pod events
	trigger   chan struct{}

	open bool // the window was open at the last look
	// rewritten: a window opened since the last let-go, so capo may be out
	// of the chain until the CNI manager puts it back.
	rewritten bool

	mu sync.Mutex
	// letting: holds may be left to let go of (one left by an agent
	// before this one too); decided are the addresses teardowns reserved
	// meanwhile, whose holds are their reservations now.
	letting bool
	decided map[string]bool
}

// teardown notes the addresses a teardown reserved (the decider's hook,
// called under their guard's lock): while holds are out, a hold of one of
// them is kept, whatever Calico says of it now (capo-ipam's release may
// come next).
func (h *rewriteHold) teardown(entries []reserve.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.letting {
		return
	}
	for _, e := range entries {
		h.decided[e.IP] = true
	}
}

func (h *rewriteHold) setLetting(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if on && !h.letting {
		h.decided = map[string]bool{}
	}
	h.letting = on
}

func (h *rewriteHold) isLetting() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.letting
}

func (h *rewriteHold) wasDecided(ip string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.decided[ip]
}

// newRewriteHold builds the hold on the agent's parts; nil without a CNI
// manager (nothing puts capo back) or a calico-node selector.
func newRewriteHold(a *Agent, r ipam.Reader, j journal.Dir, timeout func() time.Duration) *rewriteHold {
	sel := a.opts.CalicoNodeSelector
	if a.cni == nil || sel == nil || sel.Empty() {
		return nil
	}
	h := &rewriteHold{
		node:    a.opts.NodeName,
		window:  &caliconode.Window{Selector: sel, Pods: a.cluster.nodePods, Now: time.Now},
		cluster: a.cluster, cachedPod: a.cluster.cachedPod, selectors: func() []selection.Selector { return a.config.Get().Selectors },
		reserve: a.batcher, store: a.store, ipam: r, records: j.AddrRecords, installed: a.cni.InChain,
		guard: a.settler.guard, held: a.held.add, metrics: a.metrics, timeout: timeout, now: time.Now,
		every: time.Second, trigger: make(chan struct{}, 1),
	}
	a.cluster.onPodChange(h.podChanged)
	return h
}

// podChanged looks at the window again when a calico-node pod changes or
// goes, and holds a pod that starts running while it is open.
func (h *rewriteHold) podChanged(p *corev1.Pod, gone bool) {
	switch {
	case h.window.IsCalicoNode(p):
		if gone {
			h.window.Deleted()
		}
		h.poke()
	case h.isLetting():
		h.poke()
	}
}

func (h *rewriteHold) poke() {
	select {
	case h.trigger <- struct{}{}:
	default:
	}
}

func (h *rewriteHold) run(ctx context.Context) {
	h.setLetting(true)
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		h.step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-h.trigger:
		case <-t.C:
		}
	}
}

// step holds while the window is open, and after it until capo is in the
// chain again: calico-node's successor may run before the CNI manager has
// put capo back (its first write refused, the API away), and a hold not
// made yet, a pod started meanwhile, is as needed then as before. Once
// capo is back, it lets go until nothing is left to let go of.
func (h *rewriteHold) step(ctx context.Context) {
	open, why := h.window.Open()
	if open {
		h.rewritten = true
	} else if h.rewritten && h.isLetting() && !h.installed() {
		open, why = true, "calico-node replaced, capo not back in the CNI chain yet"
	}
	if open != h.open {
		h.metrics.rewriteWindow.Set(map[bool]float64{true: 1}[open])
		if open {
			slog.Warn("calico-node is being replaced on this node: holding its selected pods' addresses until capo is back in the CNI chain", "why", why)
		}
	}
	h.open = open
	if open {
		h.setLetting(true)
		h.hold(ctx)
		return
	}
	if !h.isLetting() || !h.installed() {
		return
	}
	if err := h.letGo(ctx); err != nil {
		slog.Warn("letting go of the addresses held while calico-node was replaced; trying again", "err", err)
		return
	}
	h.setLetting(false)
	h.rewritten = false
}

// hold reserves the selected pods' addresses not held yet: the running
// pods', and a going pod's while its sandbox still has it (its teardown
// has not freed it, and may yet do so through the rewritten conflist).
func (h *rewriteHold) hold(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout())
	defer cancel()
	entries, going := caliconode.HoldEntries(nodeSelection(h.cluster, h.selectors()), h.window.Pods(), h.sandboxOf(), h.now())
	for _, e := range going {
		// Unknown is no: a hold is never made on an address that may be
		// another pod's by now.
		if ok, err := h.allocatedTo(ctx, e); ok && err == nil {
			entries = append(entries, e)
		}
	}
	if len(entries) == 0 {
		return
	}
	defer h.guard.reserving(returns.IPs(entries))()
	res, err := h.reserve.Reserve(ctx, entries)
	if err != nil {
		slog.Error("holding the selected pods' addresses while calico-node is replaced; trying again", "err", err)
		return
	}
	if len(res.Added) > 0 {
		h.metrics.rewriteHolds.WithLabelValues("held").Add(float64(len(res.Added)))
		h.held(entries)
		slog.Info("held while calico-node is replaced", "ips", res.Added)
	}
}

// sandboxOf names the sandbox holding a pod's address: capo-ipam's ADD
// record of the pod, else Calico's annotations.
func (h *rewriteHold) sandboxOf() func(*corev1.Pod, string) string {
	recs, _ := h.records()
	return func(p *corev1.Pod, ip string) string {
		for _, r := range recs {
			if r.Pod.UID == string(p.UID) && r.Pod.Name == p.Name && recordsIP(r, ip) {
				return reserve.SandboxOf(r.ContainerID)
			}
		}
		return annotatedSandbox(p, ip)
	}
}

func recordsIP(r *journal.AddrRecord, ip string) bool {
	return slices.ContainsFunc(r.IPs, func(s string) bool { a, err := reserve.NormalizeAddr(s); return err == nil && a == ip })
}

// letGo ends the holds on this node whose address Calico still allocates
// to the pod's sandbox they were made for; the others are kept, the
// reservations of teardowns that went by in the window, and so are those
// a teardown through capo-ipam reserved meanwhile (teardown).
func (h *rewriteHold) letGo(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 4*h.timeout())
	defer cancel()
	entries, err := h.store.ListNode(ctx, h.node)
	if err != nil {
		return fmt.Errorf("reading this node's reservations: %w", err)
	}
	var holds, inUse []reserve.Entry
	for _, e := range entries {
		if e.Reason == reserve.ReasonCNIRewrite {
			holds = append(holds, e)
		}
	}
	for _, e := range holds {
		used, err := h.inUse(ctx, e)
		if err != nil {
			return err
		}
		if used {
			inUse = append(inUse, e)
		}
	}
	released, err := h.end(ctx, inUse)
	h.metrics.rewriteHolds.WithLabelValues("released").Add(float64(len(released)))
	h.metrics.rewriteHolds.WithLabelValues("kept").Add(float64(len(holds) - len(released)))
	if len(holds) > 0 {
		slog.Info("calico-node replaced and capo back in the CNI chain: let go of the held addresses still in use", "released", len(released), "kept", len(holds)-len(released))
	}
	return err
}

// end releases the holds no teardown has reserved since the window
// opened, under their addresses' guard: a teardown deciding now waits, and
// then finds its address free of the hold and reserves it anew.
func (h *rewriteHold) end(ctx context.Context, holds []reserve.Entry) ([]reserve.Ref, error) {
	defer h.guard.lock(returns.IPs(holds))()
	var refs []reserve.Ref
	for _, e := range holds {
		if !h.wasDecided(e.IP) {
			refs = append(refs, e.Ref())
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	return h.store.Release(ctx, refs)
}

// allocatedTo: Calico allocates e's address to e's pod, to the sandbox e
// names where it names one.
func (h *rewriteHold) allocatedTo(ctx context.Context, e reserve.Entry) (bool, error) {
	ip, err := netip.ParseAddr(e.IP)
	if err != nil {
		return false, nil
	}
	who, err := ipam.Who(ctx, h.ipam, ip)
	switch {
	case err != nil:
		return false, err
	case who == nil || who.Cooling || !who.Is(e.Namespace, e.Pod):
		return false, nil
	}
	return e.Sandbox == "" || e.IsSandbox(who.Handle), nil
}

// inUse: Calico allocates e's address to the sandbox e was made for, of
// the pod that still runs.
func (h *rewriteHold) inUse(ctx context.Context, e reserve.Entry) (bool, error) {
	if ok, err := h.allocatedTo(ctx, e); !ok || err != nil || e.Sandbox != "" {
		return ok, err
	}
	p := h.cachedPod(e.Namespace, e.Pod)
	return p != nil && string(p.UID) == e.PodUID && p.DeletionTimestamp == nil, nil
}
