package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/failpoint"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/returns"
	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

// IPAM is the part of Calico IPAM the agent reads.
type IPAM interface {
	IPsByHandle(ctx context.Context, handleID string) ([]cnet.IP, error)
	GetAssignmentAttributes(ctx context.Context, addr cnet.IP) (map[string]string, *string, error)
}

// Reserver writes this node's reservations (the batcher, in production).
type Reserver interface {
	Reserve(ctx context.Context, entries []reserve.Entry) (*reserve.Result, error)
}

var _ Reserver = (*reserve.Batcher)(nil)

// Decider answers one teardown; the socket, the journal drain and the sweep
// all ask it.
type Decider interface {
	Decide(ctx context.Context, req *wire.ReserveRequest) (*wire.ReserveResponse, error)
}

var _ Decider = (*decider)(nil)

// decider decides on what the cluster says and writes through reserve.
type decider struct {
	cluster   Cluster
	ipam      IPAM
	reserve   Reserver
	selectors func() []selection.Selector
	observe   func(time.Duration) // how long a reservation took
	now       func() time.Time
	reserved  func([]reserve.Entry) // told of every reservation written; nil: nobody
	// guard is held around a reservation's write: a return that has not
	// yet ended these addresses' reservations must not end this one; nil:
	// no returns.
	guard *addrGuard
}

// Decide reserves the sandbox's addresses if its pod is selected, or says
// why not. An error means no answer: the caller keeps the address
// allocated (capo-ipam journals; the drain retries).
func (dc *decider) Decide(ctx context.Context, req *wire.ReserveRequest) (*wire.ReserveResponse, error) {
	start := dc.now()
	pod := dc.cluster.Pod(ctx, req.Pod)
	d := selection.Decide(selection.Of(dc.cluster.Node()), selection.Of(dc.cluster.Namespace(req.Pod.Namespace)), selection.Of(pod), dc.selectors())
	if pod == nil && req.AtAdd != nil && d.Verdict == selection.Selected {
		// The pod is gone and forgotten, but capo knew it when it started.
		d = atAddDecision(req.AtAdd)
	}
	switch d.Verdict {
	case selection.NodeNotOptedIn:
		return &wire.ReserveResponse{Outcome: wire.NodeNotOptedIn, Rule: d.Rule}, nil
	case selection.NotSelected:
		return &wire.ReserveResponse{Outcome: wire.NotSelected, Rule: d.Rule}, nil
	}
	ips, err := dc.addresses(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return &wire.ReserveResponse{Outcome: wire.NothingToReserve, Rule: "handle " + req.Handle() + " holds no addresses (already released)"}, nil
	}
	var successor *corev1.Pod
	if _, _, _, recorded := req.AtAdd.RecordedOwner(); pod == nil && !recorded {
		// Journaled while the agent was away at ADD and at DEL, replayed
		// after the pod object went: the pod that now has its name tells
		// its StatefulSet, whose reservation time then applies.
		successor = dc.cluster.Successor(ctx, req.Pod)
	}
	entries := make([]reserve.Entry, 0, len(ips))
	for _, ip := range ips {
		e := entryFor(ip, req, pod, dc.now())
		if pod == nil {
			e.SetOwner(req.AtAdd)
			e.SetOwnerOf(successor)
		}
		entries = append(entries, e)
	}
	if dc.guard != nil {
		defer dc.guard.reserving(ips)()
	}
	res, err := dc.reserve.Reserve(ctx, entries)
	err = failpoint.Or(failpoint.AgentReserved, err)
	if err != nil {
		return nil, fmt.Errorf("writing the reservation of %v: %w", ips, err)
	}
	dc.observe(dc.now().Sub(start))
	if len(res.Refused) > 0 {
		return dc.releasedByHand(req, entries, res, d.Rule)
	}
	if dc.reserved != nil {
		dc.reserved(entries)
	}
	slog.Info("reserved", "pod", req.Pod.Namespace+"/"+req.Pod.Name, "ips", ips, "added", res.Added, "alreadyHeld", res.AlreadyHeld, "rule", d.Rule)
	return &wire.ReserveResponse{Outcome: wire.Reserved, IPs: ips, Rule: d.Rule}, nil
}

// releasedByHand answers a teardown an operator released by hand
// (reserve.Store.ReleaseByHand): those addresses are not held again, and
// the DEL releases them as asked; what else it reserved stays.
func (dc *decider) releasedByHand(req *wire.ReserveRequest, entries []reserve.Entry, res *reserve.Result, rule string) (*wire.ReserveResponse, error) {
	pod := req.Pod.Namespace + "/" + req.Pod.Name
	slog.Info("not reserved again: an operator released this teardown's addresses by hand", "pod", pod, "ips", res.Refused)
	held := slices.DeleteFunc(slices.Clone(entries), func(e reserve.Entry) bool { return slices.Contains(res.Refused, e.IP) })
	if len(held) == 0 {
		return &wire.ReserveResponse{Outcome: wire.NothingToReserve, Rule: "released by hand for this teardown; not reserved again"}, nil
	}
	if dc.reserved != nil {
		dc.reserved(held)
	}
	ips := returns.IPs(held)
	slog.Info("reserved", "pod", pod, "ips", ips, "added", res.Added, "alreadyHeld", res.AlreadyHeld, "rule", rule)
	return &wire.ReserveResponse{Outcome: wire.Reserved, IPs: ips, Rule: rule}, nil
}

// addresses are what capo-ipam recorded at ADD, else what Calico's handle
// holds. A missing handle means nothing is allocated any more.
func (dc *decider) addresses(ctx context.Context, req *wire.ReserveRequest) ([]string, error) {
	if len(req.RecordedIPs) > 0 {
		out := make([]string, 0, len(req.RecordedIPs))
		for _, s := range req.RecordedIPs {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("recorded address %q is not an IP", s)
			}
			out = append(out, ip.Unmap().String()) // one spelling per address, whatever was sent
		}
		return out, nil
	}
	got, err := dc.ipam.IPsByHandle(ctx, req.Handle())
	if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Calico handle %s: %w", req.Handle(), err)
	}
	out := make([]string, 0, len(got))
	for _, ip := range got {
		out = append(out, ip.String())
	}
	return out, nil
}

func entryFor(ip string, req *wire.ReserveRequest, pod *corev1.Pod, now time.Time) reserve.Entry {
	e := reserve.Entry{
		IP: ip, Namespace: req.Pod.Namespace, Pod: req.Pod.Name, PodUID: req.Pod.UID, Reason: reserve.ReasonCNIDel, ReservedAt: now.UTC(),
		Sandbox: reserve.SandboxOf(req.ContainerID),
	}
	e.SetPod(pod)
	return e
}

// atAddDecision turns the decision capo-ipam recorded at ADD into this
// DEL's: "reserve to be safe" is kept for pods nothing is known about.
func atAddDecision(at *wire.Decision) selection.Decision {
	rule := "decided when the pod started (its object is gone): " + at.Rule
	if at.Selected {
		return selection.Decision{Verdict: selection.Selected, Rule: rule}
	}
	return selection.Decision{Verdict: selection.NotSelected, Rule: rule}
}
