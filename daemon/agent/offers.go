package agent

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/returns"
)

// The offers the returner made, awaiting capo-ipam's report of how each
// ended (returner.offered).

// offer is an offer made to a pod: its object then, the addresses, and
// the predecessors' allocations capo-ipam is to free first.
type offer struct {
	pod     *corev1.Pod
	ips     []string
	reclaim []returns.Predecessor
	at      time.Time // when made: past offerTTL, no report is coming
}

// tooManyOffers is the refusal of an offer while maxOffered others await
// their reports.
const tooManyOffers returns.Reason = "too-many-offers"

// maxOffered bounds the offers remembered while their reports are awaited;
// offerTTL is how long one is awaited (an ADD's report comes within its
// own deadline, seconds). Offers are made only to pods on this node, one
// per pod, so a node never nears the bound but under forged requests.
const (
	maxOffered = 256
	offerTTL   = 2 * time.Minute
)

// rememberOffer notes an offer until its report. When the bound is reached
// it forgets offers past offerTTL, and if none is, it refuses the new one
// (false: the pod gets a fresh address) rather than forget an offer whose
// report may still come: forged requests cannot push real offers out.
func (r *returner) rememberOffer(pod *corev1.Pod, ips []string, reclaim ...returns.Predecessor) bool {
	r.offeredMu.Lock()
	defer r.offeredMu.Unlock()
	now := time.Now()
	if r.offered == nil {
		r.offered = map[types.UID]offer{}
	}
	if _, again := r.offered[pod.UID]; !again && len(r.offered) >= maxOffered {
		for uid, o := range r.offered {
			if now.Sub(o.at) > offerTTL {
				delete(r.offered, uid)
			}
		}
		if len(r.offered) >= maxOffered {
			return false
		}
	}
	r.offered[pod.UID] = offer{pod: pod, ips: ips, reclaim: reclaim, at: now}
	return true
}

// takeOffer is the offer made to the pod uid covering every one of ips,
// forgotten as it is read; false when the agent made no such offer.
func (r *returner) takeOffer(uid string, ips []string) (offer, bool) {
	r.offeredMu.Lock()
	defer r.offeredMu.Unlock()
	o, ok := r.offered[types.UID(uid)]
	if !ok || len(ips) == 0 || slices.ContainsFunc(ips, func(ip string) bool { return !slices.Contains(o.ips, ip) }) {
		return offer{}, false
	}
	delete(r.offered, types.UID(uid))
	return o, true
}
