package agent

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/returns"
	"github.com/capo-net/capo/pkg/wire"
)

// settler carries out what capo-ipam reports of an offer: it takes the
// offer, records what was reclaimed or fell back, and ends a returned
// address's reservation once Calico shows the pod up with it (settler_returned.go),
// or, with no report heard, once a reconcile sees it so.
type settler struct {
	node      string
	store     reserve.Store
	sandboxes Sandboxes
	mode      func() config.ReturnMode
	held      *heldIndex
	recorder  record.EventRecorder
	metrics   *metrics
	// pods finds a reported pod; nil or nil found: the pod as offered.
	pods func(ctx context.Context, ref wire.PodRef) *corev1.Pod
	// offers are the offerer's, taken as their reports come.
	offers *offers
	// guard orders the end of a returned address's reservation with the
	// decider's new reservations of it.
	guard *addrGuard
	// confirmFor bounds how long a reported return is watched for its
	// sandbox to come up; past it, the periodic reconcile takes over.
	confirmFor time.Duration
	// inflight are the returns being confirmed and ended: the agent waits
	// for them before it exits.
	inflight sync.WaitGroup
}

// wait waits for the returns in flight, until ctx ends.
func (s *settler) wait(ctx context.Context) {
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// heard acts on capo-ipam's report of how an offer ended, at once; a
// return is confirmed against Calico and its reservations end in the
// background. The socket is trusted no further than that: a report for an
// offer the agent did not make is ignored, and one for an offer it made
// ends nothing until Calico shows the pod's sandbox up with the addresses.
func (s *settler) heard(ctx context.Context, o wire.ReturnOutcome) {
	made, ok := s.take(o)
	if !ok {
		return
	}
	// Not tied to capo-ipam's connection: the report is acted on even if
	// capo-ipam stops waiting for the answer.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	pod := made.pod
	if s.pods != nil {
		if p := s.pods(ctx, o.Pod); p != nil {
			pod = p
		}
	}
	s.reclaimed(pod, made, &o)
	if o.Outcome != wire.Returned {
		s.fellBack(pod, &o)
		return
	}
	s.guard.expect(o.IPs)
	s.inflight.Add(1)
	go func() {
		defer s.inflight.Done()
		s.returned(context.WithoutCancel(ctx), pod, o)
	}()
}

// take is the offer o reports on; false, counted and logged, for a report
// of no offer the agent made.
func (s *settler) take(o wire.ReturnOutcome) (offer, bool) {
	made, ok := s.offers.take(o.Pod.UID, o.IPs)
	if !ok {
		s.metrics.returns.WithLabelValues("unoffered", "").Inc()
		slog.Warn("a return report for no offer the agent made: ignored", "pod", o.Pod.Namespace+"/"+o.Pod.Name, "ips", o.IPs, "outcome", o.Outcome)
	}
	return made, ok
}

// reclaimed records what capo-ipam reports it freed, of what the offer
// named only: in the log, the metrics (outcome reclaimed, the reason the
// node counts as lost) and an Event on the pod.
func (s *settler) reclaimed(pod *corev1.Pod, made offer, o *wire.ReturnOutcome) {
	for _, p := range made.reclaim {
		if !slices.Contains(o.Reclaimed, p.ContainerID) {
			continue
		}
		s.metrics.returns.WithLabelValues("reclaimed", string(p.Lost)).Inc()
		slog.Info("freed a returning member's address from its predecessor on a lost node", "pod", o.Pod.Namespace+"/"+o.Pod.Name, "ips", made.ips, "sandbox", p.ContainerID, "node", p.Node, "lost", p.Lost, "outcome", o.Outcome)
		if pod != nil {
			s.recorder.Eventf(pod, corev1.EventTypeNormal, "AddressReclaimed",
				"capo freed %s from this member's earlier sandbox %s on node %s (%s), which will never tear it down, and asked for it back; it stayed reserved for this pod throughout",
				strings.Join(made.ips, " and "), reserve.SandboxOf(p.ContainerID), p.Node, p.Lost.Says())
		}
	}
}

// fellBack records what capo-ipam reports: offered addresses that
// calico-ipam would not give back.
func (s *settler) fellBack(pod *corev1.Pod, o *wire.ReturnOutcome) {
	reason := returns.Refused // a bounded label whatever the socket says
	if slices.Contains(returns.Reasons, returns.Reason(o.Reason)) {
		reason = returns.Reason(o.Reason)
	}
	s.metrics.returns.WithLabelValues(wire.FellBack, string(reason)).Inc()
	slog.Warn("a returning pod got fresh addresses instead of its own", "pod", o.Pod.Namespace+"/"+o.Pod.Name, "ips", o.IPs, "reason", o.Reason, "why", o.Why)
	if pod != nil {
		notReturned(s.recorder, pod, o.IPs, o.Why)
	}
}
