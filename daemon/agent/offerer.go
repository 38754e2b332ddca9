package agent

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/failpoint"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/returns"
	"github.com/capo-net/capo/pkg/returns/calicoview"
	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

// offerer answers the ADD of a returning pod (returnAddress; package
// returns decides) with the addresses capo holds for it, checked against
// Calico, or why they are not given back; the settler carries out what
// capo-ipam then reports. Pods that are not candidates cost nothing; a
// candidate with nothing held on this node costs a look in memory (held).
type offerer struct {
	node     string
	store    reserve.Store
	mode     func() config.ReturnMode
	held     *heldIndex
	timeout  time.Duration // for the whole lookup; past it the pod gets a fresh address
	recorder record.EventRecorder
	metrics  *metrics
	// viewer reads Calico's view of held addresses; views, if set, in its
	// place (tests).
	viewer *calicoview.Reader
	views  func(ctx context.Context, entries []reserve.Entry) (*calicoview.View, error)
	// cooldown reads Calico's IP cooldown, which words the refusal of a
	// return whose address is still cooling.
	cooldown *calicoview.Cooldown
	// replay replays a candidate's own journaled teardowns before its
	// offer is made (after a reboot, its reservation is written only then);
	// nil: none.
	replay func(ctx context.Context, pod wire.PodRef)
	// nodes reads the Node a predecessor's allocation names, to learn
	// whether Kubernetes has declared it lost (returns.Reclaim); nil: never.
	nodes nodeGetter
	// calicoNodes names the Node of the Calico node an allocation names
	// (kubeNode); nil: the two names are one.
	calicoNodes calicoNodeGetter
	// offers are the offers made, until the settler takes them.
	offers *offers
	// cached lists every node's reservations as the API server's cache has
	// them: with sameNode, the other nodes' part of a lookup (see lookup);
	// nil: a full consistent List.
	cached func(ctx context.Context) (*reserve.Listing, error)
}

// offer is the Return for pod, or nil when it is not a candidate or
// nothing is held for it. network is the netconf capo-ipam asks under
// ("" from a capo-ipam that does not say, which is offered no reclaim).
func (o *offerer) offer(ctx context.Context, pod *corev1.Pod, nsMeta *metav1.PartialObjectMetadata, d selection.Decision, network string) *wire.Return {
	mode := o.mode()
	if ok, _ := returns.Candidate(mode, pod, d); !ok {
		return nil
	}
	if o.replay != nil {
		o.replay(ctx, wire.PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)})
	}
	if mode == config.ReturnSameNode && !o.held.has(pod) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	fresh := o.read(ctx, mode, pod)
	held, view := fresh.held, fresh.view
	if fresh.listErr != nil {
		return o.refuse(pod, nil, returns.Unreadable, "reading the reservations: "+fresh.listErr.Error())
	}
	if len(held) == 0 {
		return nil
	}
	if reason, why := returns.HeldForAnother(held, fresh.all, pod); reason != "" {
		return o.refuse(pod, held, reason, why)
	}
	if fresh.viewErr != nil {
		return o.refuse(pod, held, returns.Unreadable, fresh.viewErr.Error())
	}
	view.Cooldown = o.readCooldown(ctx)
	ns := namespaceOf(nsMeta)
	var preds []returns.Predecessor
	for _, e := range held {
		f := view.Facts(e, ns, pod.Annotations)
		if p := o.predecessor(ctx, mode, pod, e, f.Holder, network); p != nil {
			f.Holder = nil // capo-ipam frees it first: judged as free
			preds = appendPredecessor(preds, *p)
		}
		if reason, why := returns.Check(mode, e, f); reason != "" {
			return o.refuse(pod, held, reason, why)
		}
	}
	failpoint.Hit(failpoint.AgentOffer)
	if !o.offers.remember(pod, returns.IPs(held), preds...) {
		return o.refuse(pod, held, tooManyOffers, fmt.Sprintf("%d offers on this node await capo-ipam's report, none older than %s (requests on the socket that capo-ipam did not send?)", maxOffered, offerTTL))
	}
	o.metrics.returns.WithLabelValues("offered", "").Inc()
	slog.Info("offering a returning pod its addresses", "pod", pod.Namespace+"/"+pod.Name, "ips", returns.IPs(held), "reclaim", preds)
	return &wire.Return{IPs: returns.IPs(held), Reclaim: wireReclaim(preds)}
}

// readCooldown is Calico's IP cooldown, said once in the log when it
// changes; a failed read counts as none (it only words a refusal).
func (o *offerer) readCooldown(ctx context.Context) time.Duration {
	if o.cooldown == nil {
		return 0
	}
	before := o.cooldown.Last()
	d, err := o.cooldown.Get(ctx, time.Now())
	if err != nil {
		slog.Debug("could not read Calico's ipCooldownSeconds", "err", err)
	}
	o.metrics.ipCooldown.Set(d.Seconds())
	if d != before && d > 0 {
		slog.Warn("Calico's IPAMConfiguration sets ipCooldownSeconds: a member that comes back sooner than that after its teardown gets a fresh address, and its reservation stays", "ipCooldownSeconds", int(d.Seconds()))
	}
	return d
}

// lookup reads the reservations afresh: those held for pod (this node's
// for sameNode, any node's for anyNode: a pod may come back anywhere) and
// every other. The index only spares the read to pods with nothing held;
// it can be 30 s old, and what it holds may have ended or changed hands.
func (o *offerer) lookup(ctx context.Context, mode config.ReturnMode, pod *corev1.Pod) (held, all []reserve.Entry, err error) {
	if mode == config.ReturnSameNode && o.cached != nil {
		return o.lookupHere(ctx, pod)
	}
	l, err := o.store.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	mine := l.Entries
	if mode == config.ReturnSameNode {
		mine = slices.DeleteFunc(slices.Clone(l.Entries), func(e reserve.Entry) bool { return e.Node != o.node })
	}
	return returns.Held(mine, pod), l.Entries, nil
}

// refuse says why held addresses are not given back: in the log, in the
// metrics and, when something is held, on the pod.
func (o *offerer) refuse(pod *corev1.Pod, held []reserve.Entry, reason returns.Reason, why string) *wire.Return {
	o.metrics.returns.WithLabelValues("refused", string(reason)).Inc()
	slog.Info("not giving a returning pod its addresses back", "pod", pod.Namespace+"/"+pod.Name, "ips", returns.IPs(held), "reason", reason, "why", why)
	if len(held) > 0 {
		notReturned(o.recorder, pod, returns.IPs(held), why)
	}
	return &wire.Return{Held: returns.IPs(held), Reason: string(reason), Why: why}
}

// notReturned says on the pod why held addresses were not given back.
func notReturned(rec record.EventRecorder, pod *corev1.Pod, ips []string, why string) {
	rec.Eventf(pod, corev1.EventTypeNormal, "AddressNotReturned",
		"capo holds %s for this pod but did not give it back: %s. The pod gets a fresh address; the reservation stays.", strings.Join(ips, " and "), why)
}

// lookupHere is lookup with sameNode: what is held for pod comes from this
// node's own reservations, read fresh (a Get, straight from the
// datastore); the other nodes' reservations, read only to refuse an
// address also reserved there for another identity, come from the API
// server's cache at the same time. A consistent List would wait for that
// cache to catch up with etcd (tens of milliseconds under write load) and
// would still not see a reservation written the moment after; the settler
// lists consistently again before it ends a reservation. When the cached
// read fails, the full consistent List decides.
func (o *offerer) lookupHere(ctx context.Context, pod *corev1.Pod) (held, all []reserve.Entry, err error) {
	type listed struct {
		l   *reserve.Listing
		err error
	}
	others := make(chan listed, 1)
	go func() {
		l, err := o.cached(ctx)
		others <- listed{l, err}
	}()
	own, err := o.store.ListNode(ctx, o.node)
	if err != nil {
		return nil, nil, err
	}
	c := <-others
	if c.err != nil {
		slog.Debug("the cached read of other nodes' reservations failed: listing them all", "err", c.err)
		return o.lookupAll(ctx, pod)
	}
	all = slices.Clone(own)
	for _, e := range c.l.Entries {
		if e.Node != o.node {
			all = append(all, e)
		}
	}
	return returns.Held(own, pod), all, nil
}

// lookupAll is lookup's consistent List, sameNode.
func (o *offerer) lookupAll(ctx context.Context, pod *corev1.Pod) (held, all []reserve.Entry, err error) {
	l, err := o.store.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	mine := slices.DeleteFunc(slices.Clone(l.Entries), func(e reserve.Entry) bool { return e.Node != o.node })
	return returns.Held(mine, pod), l.Entries, nil
}
