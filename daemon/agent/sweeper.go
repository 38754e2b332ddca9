package agent

import (
	"context"
	"errors"
	"log/slog"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/pause"
	"github.com/capo-net/capo/pkg/wire"
)

// Teardowns that went around capo-ipam. capo-ipam removes a sandbox's ADD
// record once its DEL has released the addresses, so a record whose Calico
// handle is gone was released by something else:
//   - a DEL that read Calico's own conflist: calico-node rewrote it and the
//     runtime read it before the agent put capo back, or while the agent
//     was down;
//   - Calico's IPAM garbage collector.
//
// The sweep decides each such record as its DEL would have been decided, so
// a selected pod's addresses are reserved after the fact, unless another pod
// holds them already, and then removes the record. It also clears records
// whose DEL never came.

// sweeper finds teardowns that went around capo-ipam.
type sweeper struct {
	node     string
	cluster  Cluster
	ipam     IPAM
	journal  journal.Dir
	decider  Decider
	timeout  func() time.Duration // for one decision
	interval time.Duration        // of the periodic pass over gone pods' records
	// pause spaces the handle reads; grace lets a DEL in flight remove its
	// own record.
	pause, grace time.Duration
	metrics      *metrics
}

// sweepAddrs checks the ADD records. With all false, records of pods that
// still run on this node with the same UID are skipped, so a periodic pass
// reads Calico's handles only for pods that are gone. It returns how many
// records could not be checked.
func (sw *sweeper) sweepAddrs(ctx context.Context, all bool) (unchecked int) {
	recs, err := sw.journal.AddrRecords()
	if err != nil {
		slog.Error("reading ADD records", "dir", sw.journal.Root, "err", err)
		return
	}
	held := map[string]bool{} // journaled DELs keep their addresses allocated on purpose
	if pending, err := sw.journal.Pending(); err == nil {
		for _, e := range pending {
			if e.Record != nil {
				held[e.Record.Request.Handle()] = true
			}
		}
	}
	var released []*journal.AddrRecord
	for _, r := range recs {
		if held[r.Handle()] || !all && sw.podRunsHere(r.Pod) {
			continue
		}
		// Live DELs share the datastore client's rate limit: the sweep
		// takes a small part of it.
		if !pause.Sleep(ctx, sw.pause) {
			return
		}
		ips, err := sw.ipam.IPsByHandle(ctx, r.Handle())
		switch {
		case err == nil && len(ips) > 0:
			continue // still allocated: its DEL has not come
		case err != nil && !errors.As(err, new(cerrors.ErrorResourceDoesNotExist)):
			slog.Warn("ADD record not checked; next sweep", "handle", r.Handle(), "err", err)
			unchecked++
			continue
		}
		released = append(released, r)
	}
	if len(released) == 0 {
		return unchecked
	}
	// A DEL through capo-ipam removes the record just after the release:
	// give any in flight the moment to finish before calling it bypassed.
	if !pause.Sleep(ctx, sw.grace) {
		return
	}
	for _, r := range released {
		if ctx.Err() != nil {
			return
		}
		if sw.journal.Addrs(r.Network, r.ContainerID, r.IfName) == nil {
			continue // capo-ipam's own DEL
		}
		sw.settle(ctx, r)
	}
	return unchecked
}

// podRunsHere: the record's pod is on this node, the same incarnation, and
// not finished.
func (sw *sweeper) podRunsHere(ref wire.PodRef) bool {
	p := sw.cluster.Pod(context.Background(), ref)
	return p != nil && p.DeletionTimestamp == nil && p.Spec.NodeName == sw.node &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// settle decides a record whose addresses were released behind capo's back.
func (sw *sweeper) settle(ctx context.Context, r *journal.AddrRecord) {
	forget := func(outcome string) {
		if err := sw.journal.ForgetAddrs(r.Network, r.ContainerID, r.IfName); err != nil {
			slog.Warn("removing ADD record", "err", err)
			return
		}
		slog.Debug("ADD record settled", "handle", r.Handle(), "outcome", outcome)
	}
	if r.Pod.Name == "" {
		forget("not a pod's") // nothing the DEL would have decided on
		return
	}
	free := notReused(ctx, sw.ipam, r.Handle(), r.Pod, r.IPs)
	if len(free) == 0 {
		forget("reused")
		return
	}
	// Decided as its DEL would have been: on the pod if known, else on what
	// capo knew when it started, else reserved to be safe.
	req := &wire.ReserveRequest{ContainerID: r.ContainerID, IfName: r.IfName, Network: r.Network, Pod: r.Pod, RecordedIPs: free, AtAdd: r.AtAdd}
	dctx, cancel := context.WithTimeout(ctx, sw.timeout())
	resp, err := sw.decider.Decide(dctx, req)
	cancel()
	if err != nil {
		sw.metrics.decisions.WithLabelValues("failed", "sweep").Inc()
		slog.Error("teardown that went around capo-ipam not decided; next sweep", "pod", r.Pod.Namespace+"/"+r.Pod.Name, "err", err)
		return
	}
	sw.metrics.decisions.WithLabelValues(string(resp.Outcome), "sweep").Inc()
	if resp.Outcome == wire.Reserved {
		sw.metrics.bypassed.Inc()
		slog.Warn("a teardown went around capo-ipam (conflist rewritten, or the agent was away); reserved after the fact",
			"pod", r.Pod.Namespace+"/"+r.Pod.Name, "ips", resp.IPs, "rule", resp.Rule)
	}
	forget(string(resp.Outcome))
}

// sweepLoop sweeps everything once the agent starts (it may have been away
// while DELs went by), after each CNI re-apply (the rewrite window), and
// the gone pods' records every interval.
func (sw *sweeper) run(ctx context.Context, reapplied <-chan struct{}) {
	sw.sweepAll(ctx)
	t := time.NewTicker(sw.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-reapplied:
			sw.sweepAll(ctx)
			// A DEL that read the rewritten conflist may still be
			// releasing: looked for again once it has most likely
			// landed, and once more after a slow one.
			for _, wait := range []time.Duration{reapplySoon, reapplySettle - reapplySoon} {
				if !pause.Sleep(ctx, wait) {
					return
				}
				sw.sweepAddrs(ctx, true)
			}
		case <-t.C:
			sw.sweepAddrs(ctx, false)
		}
	}
}

// sweepAll sweeps every record, and again, sooner than the interval,
// while some could not be checked (Calico not readable, the agent's gate
// not open yet at its start): the periodic sweep skips running pods, so a
// record left unchecked here would never be.
func (sw *sweeper) sweepAll(ctx context.Context) {
	for wait := time.Second; sw.sweepAddrs(ctx, true) > 0; wait = min(2*wait, sw.interval) {
		if !pause.Sleep(ctx, wait) {
			return
		}
	}
}

// reapplySoon and reapplySettle are how long after a re-apply the sweep
// runs again: a DEL that read the rewritten conflist just before takes
// calico-ipam well under a second to release, its address free and
// unreserved until the sweep finds it; a slow one, a few seconds.
const (
	reapplySoon   = time.Second
	reapplySettle = 10 * time.Second
)
