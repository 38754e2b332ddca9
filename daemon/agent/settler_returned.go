package agent

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/failpoint"
	"github.com/capo-net/capo/pkg/pause"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/returns"
	"github.com/capo-net/capo/pkg/wire"
)

// defaultConfirmFor bounds the watch on a reported return: the calico
// plugin writes the endpoint a few hundred milliseconds after IPAM.
const defaultConfirmFor = 30 * time.Second

// returned follows a return capo-ipam reported until Calico shows its
// sandbox up with the addresses, then ends their reservations (reason
// returned). A sandbox whose set-up fails after IPAM never comes up: the
// calico plugin releases the addresses, and they stay reserved.
func (s *settler) returned(ctx context.Context, pod *corev1.Pod, o wire.ReturnOutcome) {
	wait := s.confirmFor
	if wait == 0 {
		wait = defaultConfirmFor
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	name := o.Pod.Namespace + "/" + o.Pod.Name
	if o.Sandbox.ContainerID == "" || pod == nil {
		slog.Info("a return report names no sandbox (an older capo-ipam) or no known pod: the reconcile ends its reservations once Calico shows the pod up", "pod", name, "ips", o.IPs)
		return
	}
	state, err := s.awaitUp(ctx, pod, o.Sandbox, o.IPs)
	switch {
	case state == sandboxGone:
		s.metrics.returns.WithLabelValues("rolled-back", "").Inc()
		slog.Warn("a sandbox given its addresses back did not come up (Calico released them): they stay reserved", "pod", name, "ips", o.IPs, "sandbox", o.Sandbox.ContainerID)
		return
	case state != sandboxUp:
		slog.Warn("a return is not confirmed yet: its reservations end when a later check sees the pod up with them", "pod", name, "ips", o.IPs, "err", err)
		return
	}
	s.metrics.returns.WithLabelValues(wire.Returned, "").Inc()
	s.end(ctx, pod, o.IPs)
}

// awaitUp polls Calico until the sandbox is up or gone, or ctx ends.
func (s *settler) awaitUp(ctx context.Context, pod *corev1.Pod, sb wire.Sandbox, ips []string) (sandboxState, error) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		state, err := s.sandboxes.State(ctx, s.node, pod, sb, ips)
		if err == nil && state != sandboxSettingUp {
			return state, nil
		}
		if !slices.ContainsFunc(ips, s.guard.isPending) {
			return sandboxSettingUp, fmt.Errorf("reserved anew by a teardown since")
		}
		if !pause.Sleep(ctx, wait) {
			return sandboxSettingUp, fmt.Errorf("not up within the wait (last read: %v)", err)
		}
	}
}

// end ends the pod's reservations of ips, a few tries over a datastore
// briefly away; past them the reconcile tries again.
func (s *settler) end(ctx context.Context, pod *corev1.Pod, ips []string) {
	name := pod.Namespace + "/" + pod.Name
	var released []reserve.Ref
	for attempt := 1; ; attempt++ {
		var err error
		if released, err = s.endReturned(ctx, pod, ips); err == nil {
			break
		}
		if attempt == returnedAttempts || !pause.Sleep(ctx, time.Second) {
			slog.Warn("ending the reservations of returned addresses; the next check tries again", "pod", name, "ips", ips, "err", err)
			return
		}
	}
	if len(released) == 0 {
		return
	}
	slog.Info("released", "pod", name, "reason", wire.Returned, "refs", released)
	s.recorder.Eventf(pod, corev1.EventTypeNormal, "AddressReturned", "capo gave this pod back %s, held for it since its last teardown; the reservation ended (returned)", strings.Join(ips, " and "))
}

// returnedAttempts bounds the tries at ending a return's reservations: the
// datastore may be briefly away, and each try is cheap.
const returnedAttempts = 3

// endReturned ends the pod's reservations of ips that are still pending:
// none written since (guard settles those). It holds those addresses'
// locks only; an error leaves them pending for another try.
func (s *settler) endReturned(ctx context.Context, pod *corev1.Pod, ips []string) ([]reserve.Ref, error) {
	unlock := s.guard.lock(ips)
	defer unlock()
	l, err := s.store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading reservations: %w", err)
	}
	var refs []reserve.Ref
	for _, e := range l.Entries {
		if returns.Owns(pod, e) && slices.Contains(ips, e.IP) && s.guard.isPending(e.IP) {
			refs = append(refs, e.Ref())
		}
	}
	failpoint.Hit(failpoint.AgentSettle)
	released, err := s.store.Release(ctx, refs)
	for _, ref := range released {
		s.held.remove([]string{ref.IP})
	}
	if err != nil {
		return released, err
	}
	s.guard.settle(ips)
	return released, nil
}

// reconcile ends the reservations of addresses their own pod has back on
// this node with no report heard (capo-ipam could not reach the agent, or
// the agent restarted while it watched): Calico allocates the address to
// the pod's current sandbox, whose endpoint is up with it. Run after each
// read of the node's reservations.
func (s *settler) reconcile(ctx context.Context, entries []reserve.Entry, podOf func(namespace, name string) *corev1.Pod, ifNameOf func(handle string) string) {
	for _, e := range entries {
		if e.Reason == reserve.ReasonCNIRewrite {
			continue // a running pod's address held while calico-node is replaced: not a return (rewritehold.go ends it)
		}
		pod := podOf(e.Namespace, e.Pod)
		if pod == nil || pod.Spec.NodeName != s.node || !returns.Owns(pod, e) || pod.Annotations[returns.PodAnnotation] == returns.Disabled {
			continue
		}
		sb, ok := s.currentSandbox(ctx, e, pod, ifNameOf)
		if !ok {
			continue
		}
		s.guard.expect([]string{e.IP})
		if state, err := s.sandboxes.State(ctx, s.node, pod, sb, []string{e.IP}); err != nil || state != sandboxUp {
			continue
		}
		slog.Info("a pod has its address back with no report heard: ending its reservation", "pod", e.Namespace+"/"+e.Pod, "ip", e.IP)
		s.metrics.returns.WithLabelValues(wire.Returned, "reconciled").Inc()
		s.end(ctx, pod, []string{e.IP})
	}
}

// reconcilable are the reservations a pod on this node may have got back:
// this node's, and with anyNode every node's (one more list of the
// reservation objects every 30 s, as each calico-ipam ADD makes one).
func (s *settler) reconcilable(ctx context.Context, own []reserve.Entry) []reserve.Entry {
	if s.mode == nil || s.mode() != config.ReturnAnyNode {
		return own
	}
	l, err := s.store.List(ctx)
	if err != nil {
		slog.Warn("reading every node's reservations for the returns to reconcile; this node's only", "err", err)
		return own
	}
	return l.Entries
}

// currentSandbox is the sandbox Calico allocates e's address to, when it
// is the pod's and not the one torn down when e was reserved.
func (s *settler) currentSandbox(ctx context.Context, e reserve.Entry, pod *corev1.Pod, ifNameOf func(string) string) (wire.Sandbox, bool) {
	h, err := s.sandboxes.Holder(ctx, e.IP)
	if err != nil || h == nil || h.Handle == "" || e.IsSandbox(h.Handle) || !h.Is(pod.Namespace, pod.Name) {
		return wire.Sandbox{}, false
	}
	return sandboxOfHandle(h.Handle, ifNameOf(h.Handle))
}
