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
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/returns"
	"github.com/capo-net/capo/pkg/returns/calicoview"
	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

// returner carries out returns (returnAddress; package returns decides
// them): it answers the ADD of a returning pod with the addresses capo
// holds for it, checked against Calico, or why they are not given back,
// and ends their reservations once Calico shows the pod up with them.
// Pods that are not candidates cost nothing; a candidate with nothing held
// on this node costs a look in memory (held).
type returner struct {
	node      string
	store     reserve.Store
	calico    clientv3.Interface
	sandboxes Sandboxes
	mode      func() config.ReturnMode
	held      *heldIndex
	timeout   time.Duration // for the whole lookup; past it the pod gets a fresh address
	recorder  record.EventRecorder
	metrics   *metrics
	// views reads Calico's view of held addresses; nil: calicoview.Read.
	views func(ctx context.Context, entries []reserve.Entry) (*calicoview.View, error)
	// cooldown reads Calico's IP cooldown, which words the refusal of a
	// return whose address is still cooling.
	cooldown *calicoview.Cooldown
	// replay replays a candidate's own journaled teardowns before its
	// offer is made (after a reboot, its reservation is written only then);
	// nil: none.
	replay func(ctx context.Context, pod wire.PodRef)
	// confirmFor bounds how long a reported return is watched for its
	// sandbox to come up; past it, the periodic reconcile takes over.
	confirmFor time.Duration
	// nodes reads the Node a predecessor's allocation names, to learn
	// whether Kubernetes has declared it lost (returns.Reclaim); nil: never.
	nodes nodeGetter
	// calicoNodes names the Node of the Calico node an allocation names
	// (kubeNode); nil: the two names are one.
	calicoNodes calicoNodeGetter

	// locks order the end of a returned address's reservation with new
	// reservations of the same address (guard), address by address.
	locks addrLocks
	// pending are the addresses whose reservations are to end once their
	// sandbox is up; a reservation written since removes them.
	pendingMu sync.Mutex
	pending   map[string]bool

	// offered are the offers made, by pod UID, until capo-ipam says how
	// each ended: a report is acted on only for an offer the agent made,
	// and judged on the pod as it was offered, should the pod be gone from
	// the cache or the API server be slow to answer by then.
	offeredMu sync.Mutex
	offered   map[types.UID]offer

	// inflight are the returns being confirmed and ended: the agent waits
	// for them before it exits.
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

// expect notes addresses whose reservations are to end once their sandbox
// is up; any teardown before then reserves them anew, and that must stay.
func (r *returner) expect(ips []string) {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	if r.pending == nil {
		r.pending = map[string]bool{}
	}
	for _, ip := range ips {
		r.pending[ip] = true
	}
}

// isPending reports whether ip's reservation is still to end as returned.
func (r *returner) isPending(ip string) bool {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	return r.pending[ip]
}

func (r *returner) settle(ips []string) {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	for _, ip := range ips {
		delete(r.pending, ip)
	}
}

// guard is taken by every reservation write, for its addresses only: they
// are no longer to be ended as returned.
func (r *returner) guard(ips []string) func() {
	unlock := r.locks.lock(ips)
	r.settle(ips)
	return unlock
}

// offer is the Return for pod, or nil when it is not a candidate or
// nothing is held for it. network is the netconf capo-ipam asks under
// ("" from a capo-ipam that does not say, which is offered no reclaim).
func (r *returner) offer(ctx context.Context, pod *corev1.Pod, nsMeta *metav1.PartialObjectMetadata, d selection.Decision, network string) *wire.Return {
	mode := r.mode()
	if ok, _ := returns.Candidate(mode, pod, d); !ok {
		return nil
	}
	if r.replay != nil {
		r.replay(ctx, wire.PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)})
	}
	if mode == config.ReturnSameNode && !r.held.has(pod) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	fresh := r.read(ctx, mode, pod)
	held, view := fresh.held, fresh.view
	if fresh.listErr != nil {
		return r.refuse(pod, nil, returns.Unreadable, "reading the reservations: "+fresh.listErr.Error())
	}
	if len(held) == 0 {
		return nil
	}
	if reason, why := returns.HeldForAnother(held, fresh.all, pod); reason != "" {
		return r.refuse(pod, held, reason, why)
	}
	if fresh.viewErr != nil {
		return r.refuse(pod, held, returns.Unreadable, fresh.viewErr.Error())
	}
	view.Cooldown = r.readCooldown(ctx)
	ns := namespaceOf(nsMeta)
	var preds []returns.Predecessor
	for _, e := range held {
		f := view.Facts(e, ns, pod.Annotations)
		if p := r.predecessor(ctx, mode, pod, e, f.Holder, network); p != nil {
			f.Holder = nil // capo-ipam frees it first: judged as free
			preds = appendPredecessor(preds, *p)
		}
		if reason, why := returns.Check(mode, e, f); reason != "" {
			return r.refuse(pod, held, reason, why)
		}
	}
	if !r.rememberOffer(pod, returns.IPs(held), preds...) {
		return r.refuse(pod, held, tooManyOffers, fmt.Sprintf("%d offers on this node await capo-ipam's report, none older than %s (requests on the socket that capo-ipam did not send?)", maxOffered, offerTTL))
	}
	r.metrics.returns.WithLabelValues("offered", "").Inc()
	slog.Info("offering a returning pod its addresses", "pod", pod.Namespace+"/"+pod.Name, "ips", returns.IPs(held), "reclaim", preds)
	return &wire.Return{IPs: returns.IPs(held), Reclaim: wireReclaim(preds)}
}

// readCooldown is Calico's IP cooldown, said once in the log when it
// changes; a failed read counts as none (it only words a refusal).
func (r *returner) readCooldown(ctx context.Context) time.Duration {
	if r.cooldown == nil {
		return 0
	}
	before := r.cooldown.Last()
	d, err := r.cooldown.Get(ctx, time.Now())
	if err != nil {
		slog.Debug("could not read Calico's ipCooldownSeconds", "err", err)
	}
	r.metrics.ipCooldown.Set(d.Seconds())
	if d != before && d > 0 {
		slog.Warn("Calico's IPAMConfiguration sets ipCooldownSeconds: a member that comes back sooner than that after its teardown gets a fresh address, and its reservation stays", "ipCooldownSeconds", int(d.Seconds()))
	}
	return d
}

// lookup reads the reservations afresh: those held for pod (this node's
// for sameNode, any node's for anyNode: a pod may come back anywhere) and
// every other. The index only spares the read to pods with nothing held;
// it can be 30 s old, and what it holds may have ended or changed hands.
func (r *returner) lookup(ctx context.Context, mode config.ReturnMode, pod *corev1.Pod) (held, all []reserve.Entry, err error) {
	l, err := r.store.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	mine := l.Entries
	if mode == config.ReturnSameNode {
		mine = slices.DeleteFunc(slices.Clone(l.Entries), func(e reserve.Entry) bool { return e.Node != r.node })
	}
	return returns.Held(mine, pod), l.Entries, nil
}

// refuse says why held addresses are not given back: in the log, in the
// metrics and, when something is held, on the pod.
func (r *returner) refuse(pod *corev1.Pod, held []reserve.Entry, reason returns.Reason, why string) *wire.Return {
	r.metrics.returns.WithLabelValues("refused", string(reason)).Inc()
	slog.Info("not giving a returning pod its addresses back", "pod", pod.Namespace+"/"+pod.Name, "ips", returns.IPs(held), "reason", reason, "why", why)
	if len(held) > 0 {
		r.event(pod, returns.IPs(held), why)
	}
	return &wire.Return{Held: returns.IPs(held), Reason: string(reason), Why: why}
}

func (r *returner) event(pod *corev1.Pod, ips []string, why string) {
	r.recorder.Eventf(pod, corev1.EventTypeNormal, "AddressNotReturned",
		"capo holds %s for this pod but did not give it back: %s. The pod gets a fresh address; the reservation stays.", strings.Join(ips, " and "), why)
}

// fellBack records what capo-ipam reports: offered addresses that
// calico-ipam would not give back.
func (r *returner) fellBack(pod *corev1.Pod, o *wire.ReturnOutcome) {
	reason := returns.Refused // a bounded label whatever the socket says
	if slices.Contains(returns.Reasons, returns.Reason(o.Reason)) {
		reason = returns.Reason(o.Reason)
	}
	r.metrics.returns.WithLabelValues(wire.FellBack, string(reason)).Inc()
	slog.Warn("a returning pod got fresh addresses instead of its own", "pod", o.Pod.Namespace+"/"+o.Pod.Name, "ips", o.IPs, "reason", o.Reason, "why", o.Why)
	if pod != nil {
		r.event(pod, o.IPs, o.Why)
	}
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
// its name when it has a controller. The name is not tied to the
// controller's UID: the index may be 30 s behind the controller handing a
// re-created StatefulSet its members' reservations, and only spares reads
// (returns.Held decides on a fresh one).
func identities(namespace, name, podUID, ownerUID string) []string {
	var ids []string
	if podUID != "" {
		ids = append(ids, "uid/"+podUID)
	}
	if ownerUID != "" {
		ids = append(ids, "name/"+namespace+"/"+name)
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
