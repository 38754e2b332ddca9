package agent

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/giveback"
	"github.com/capo-net/capo/pkg/giveback/calicoview"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

// returner answers the ADD of a returning pod: the addresses
// capo holds for it, checked against Calico, or why they are not given
// back. Pods that are not candidates cost nothing; a candidate with
// nothing held on this node costs a look in memory (held).
type returner struct {
	node     string
	store    reserve.Store
	calico   clientv3.Interface
	mode     func() config.ReturnMode
	held     *heldIndex
	timeout  time.Duration // for the whole lookup; past it the pod gets a fresh address
	recorder record.EventRecorder
	metrics  *metrics

	// mu orders the end of returned addresses' reservations with new
	// reservations of the same addresses (guard); pending are the
	// addresses whose reservations are still to end.
	mu      sync.Mutex
	pending map[string]bool

	// offered are the pods offered addresses, by UID, until capo-ipam says
	// how the offer ended: its report is judged on the pod as it was
	// offered, should the pod be gone from the cache or the API server be
	// slow to answer by then.
	offeredMu sync.Mutex
	offered   map[types.UID]*corev1.Pod

	// inflight are the returns whose reservations are being ended: the
	// agent waits for them before it exits.
	inflight sync.WaitGroup
}

// wait waits for the returns in flight, until ctx ends.
func (r *returner) wait(ctx context.Context) {
	done := make(chan struct{})
	go func() { r.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// maxOffered bounds the offers remembered while their reports are awaited.
const maxOffered = 256

func (r *returner) rememberOffer(pod *corev1.Pod) {
	r.offeredMu.Lock()
	defer r.offeredMu.Unlock()
	if r.offered == nil || len(r.offered) >= maxOffered {
		r.offered = map[types.UID]*corev1.Pod{}
	}
	r.offered[pod.UID] = pod
}

// offeredPod is the pod an offer went to, forgotten as it is read.
func (r *returner) offeredPod(uid string) *corev1.Pod {
	r.offeredMu.Lock()
	defer r.offeredMu.Unlock()
	p := r.offered[types.UID(uid)]
	delete(r.offered, types.UID(uid))
	return p
}

// expect notes addresses given back, before capo-ipam's ADD returns: any
// teardown after it reserves them anew, and that reservation must stay.
func (r *returner) expect(ips []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = map[string]bool{}
	}
	for _, ip := range ips {
		r.pending[ip] = true
	}
}

// guard is taken by every reservation write: the addresses it reserves are
// no longer to be ended as returned.
func (r *returner) guard(ips []string) func() {
	r.mu.Lock()
	for _, ip := range ips {
		delete(r.pending, ip)
	}
	return r.mu.Unlock
}

// offer is the Return for pod, or nil when it is not a candidate or
// nothing is held for it.
func (r *returner) offer(ctx context.Context, pod *corev1.Pod, nsMeta *metav1.PartialObjectMetadata, d selection.Decision) *wire.Return {
	mode := r.mode()
	if ok, _ := giveback.Candidate(mode, pod, d); !ok {
		return nil
	}
	if mode == config.ReturnSameNode && !r.held.has(pod) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	held, err := r.lookup(ctx, mode, pod)
	if err != nil {
		return r.refuse(pod, nil, giveback.Unreadable, "reading the reservations: "+err.Error())
	}
	if len(held) == 0 {
		return nil
	}
	view, err := calicoview.Read(ctx, r.calico, r.node, held)
	if err != nil {
		return r.refuse(pod, held, giveback.Unreadable, err.Error())
	}
	ns := namespaceOf(nsMeta)
	for _, e := range held {
		if reason, why := giveback.Check(mode, e, view.Facts(e, ns, pod.Annotations)); reason != "" {
			return r.refuse(pod, held, reason, why)
		}
	}
	r.metrics.returns.WithLabelValues("offered", "").Inc()
	r.rememberOffer(pod)
	slog.Info("offering a returning pod its addresses", "pod", pod.Namespace+"/"+pod.Name, "ips", giveback.IPs(held))
	return &wire.Return{IPs: giveback.IPs(held)}
}

// lookup finds the reservations held for pod: in the index of this node's
// for sameNode, in every object for anyNode (a pod may come back anywhere).
func (r *returner) lookup(ctx context.Context, mode config.ReturnMode, pod *corev1.Pod) ([]reserve.Entry, error) {
	if mode == config.ReturnSameNode {
		return giveback.Held(r.held.entries(), pod), nil
	}
	l, err := r.store.List(ctx)
	if err != nil {
		return nil, err
	}
	return giveback.Held(l.Entries, pod), nil
}

// refuse says why held addresses are not given back: in the log, in the
// metrics and, when something is held, on the pod.
func (r *returner) refuse(pod *corev1.Pod, held []reserve.Entry, reason giveback.Reason, why string) *wire.Return {
	r.metrics.returns.WithLabelValues("refused", string(reason)).Inc()
	slog.Info("not giving a returning pod its addresses back", "pod", pod.Namespace+"/"+pod.Name, "ips", giveback.IPs(held), "reason", reason, "why", why)
	if len(held) > 0 {
		r.event(pod, giveback.IPs(held), why)
	}
	return &wire.Return{Held: giveback.IPs(held), Reason: string(reason), Why: why}
}

func (r *returner) event(pod *corev1.Pod, ips []string, why string) {
	r.recorder.Eventf(pod, corev1.EventTypeNormal, "AddressNotReturned",
		"capo holds %s for this pod but did not give it back: %s. The pod gets a fresh address; the reservation stays.", strings.Join(ips, " and "), why)
}

// fellBack records what capo-ipam reports: offered addresses that
// calico-ipam would not give back.
func (r *returner) fellBack(pod *corev1.Pod, o *wire.ReturnOutcome) {
	reason := giveback.Refused // a bounded label whatever the socket says
	if slices.Contains(giveback.Reasons, giveback.Reason(o.Reason)) {
		reason = giveback.Reason(o.Reason)
	}
	r.metrics.returns.WithLabelValues(wire.FellBack, string(reason)).Inc()
	slog.Warn("a returning pod got fresh addresses instead of its own", "pod", o.Pod.Namespace+"/"+o.Pod.Name, "ips", o.IPs, "reason", o.Reason, "why", o.Why)
	if pod != nil {
		r.event(pod, o.IPs, o.Why)
	}
}

// returned ends the reservations of addresses a returning pod got back,
// with reason returned. Only the pod's own identity's entries end: an
// address held for someone else stays held.
func (r *returner) returned(ctx context.Context, pod *corev1.Pod, o wire.ReturnOutcome) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r.metrics.returns.WithLabelValues(wire.Returned, "").Inc()
	if pod == nil {
		slog.Warn("a pod got its addresses back but is not known to the agent: its reservations end as any other does", "pod", o.Pod.Namespace+"/"+o.Pod.Name, "ips", o.IPs)
		return
	}
	var released []reserve.Ref
	for attempt := 1; ; attempt++ {
		var err error
		if released, err = r.endReturned(ctx, pod, o.IPs); err == nil {
			break
		}
		if attempt == returnedAttempts || !sleep(ctx, time.Second) {
			slog.Warn("ending the reservations of returned addresses; they end as any other does", "pod", o.Pod.Namespace+"/"+o.Pod.Name, "ips", o.IPs, "err", err)
			return
		}
	}
	slog.Info("released", "pod", o.Pod.Namespace+"/"+o.Pod.Name, "reason", wire.Returned, "refs", released)
	r.recorder.Eventf(pod, corev1.EventTypeNormal, "AddressReturned", "capo gave this pod back %s, held for it since its last teardown; the reservation ended (returned)", strings.Join(o.IPs, " and "))
}

// returnedAttempts bounds the tries at ending a return's reservations: the
// datastore may be briefly away, and each try is cheap.
const returnedAttempts = 3

// endReturned ends the pod's reservations of ips that are still pending:
// none written since the report (guard clears those). An error leaves them
// pending for another try.
func (r *returner) endReturned(ctx context.Context, pod *corev1.Pod, ips []string) ([]reserve.Ref, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, err := r.store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading reservations: %w", err)
	}
	var refs []reserve.Ref
	for _, e := range giveback.Held(l.Entries, pod) {
		if slices.Contains(ips, e.IP) && r.pending[e.IP] {
			refs = append(refs, e.Ref())
		}
	}
	released, err := r.store.Release(ctx, refs)
	for _, ref := range released {
		r.held.remove([]string{ref.IP})
	}
	if err != nil {
		return released, err
	}
	for _, ip := range ips {
		delete(r.pending, ip)
	}
	return released, nil
}

// heldIndex remembers this node's reservations, from every read of them
// (every 30 s) and every one this agent writes or ends, so that a pod's ADD
// reads none: a candidate with nothing held costs a map lookup, and one
// with something held starts at once on what Calico says of it. A stale
// miss (written by capo-controller since the last read) only means a fresh
// address; a stale hit (released since) is checked against Calico's
// allocations like any other, so a free old address still comes back.
type heldIndex struct {
	node string
	mu   sync.Mutex
	byIP map[string]reserve.Entry
	ids  map[string]bool
}

func newHeldIndex(node string) *heldIndex {
	return &heldIndex{node: node, byIP: map[string]reserve.Entry{}, ids: map[string]bool{}}
}

// identities are the keys an entry or a pod is known by: its pod UID, and
// its name under its controller.
func identities(namespace, name, podUID, ownerUID string) []string {
	var ids []string
	if podUID != "" {
		ids = append(ids, "uid/"+podUID)
	}
	if ownerUID != "" {
		ids = append(ids, namespace+"/"+name+"/"+ownerUID)
	}
	return ids
}

func (h *heldIndex) has(pod *corev1.Pod) bool {
	var owner string
	if ref := metav1.GetControllerOf(pod); ref != nil {
		owner = string(ref.UID)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range identities(pod.Namespace, pod.Name, string(pod.UID), owner) {
		if h.ids[id] {
			return true
		}
	}
	return false
}

// entries are the reservations the index knows.
func (h *heldIndex) entries() []reserve.Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]reserve.Entry, 0, len(h.byIP))
	for _, e := range h.byIP {
		out = append(out, e)
	}
	return out
}

// replace sets the index to what a read of the node's reservations found.
func (h *heldIndex) replace(es []reserve.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byIP = make(map[string]reserve.Entry, len(es))
	h.addLocked(es)
}

// add notes reservations this agent wrote.
func (h *heldIndex) add(es []reserve.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addLocked(es)
}

// addLocked keys entries as the store does: addresses normalised, held
// for the index's node (an entry being written has no node yet).
func (h *heldIndex) addLocked(es []reserve.Entry) {
	for _, e := range es {
		if ip, err := reserve.NormalizeAddr(e.IP); err == nil {
			e.IP = ip
		}
		e.Node = h.node
		h.byIP[e.IP] = e
	}
	h.reindex()
}

// remove forgets reservations this agent ended.
func (h *heldIndex) remove(ips []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ip := range ips {
		delete(h.byIP, ip)
	}
	h.reindex()
}

func (h *heldIndex) reindex() {
	h.ids = make(map[string]bool, 2*len(h.byIP))
	for _, e := range h.byIP {
		for _, id := range identities(e.Namespace, e.Pod, e.PodUID, e.OwnerUID) {
			h.ids[id] = true
		}
	}
}

// namespaceOf is the namespace Calico's pool selectors judge: its labels and
// annotations are all the agent caches of it, and all they read.
func namespaceOf(m *metav1.PartialObjectMetadata) *corev1.Namespace {
	if m == nil {
		return nil
	}
	return &corev1.Namespace{ObjectMeta: m.ObjectMeta}
}
