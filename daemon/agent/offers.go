package agent

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/returns"
)

// The offers the offerer made, awaiting capo-ipam's report of how each
// ended, when the settler takes them.

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

// offers are the offers made, by pod UID, until capo-ipam says how each
// ended: the offerer remembers them, the settler takes them. A report is
// acted on only for an offer the agent made, and judged on the pod as it
// was offered, should the pod be gone from the cache or the API server be
// slow to answer by then.
type offers struct {
	mu    sync.Mutex
	byUID map[types.UID]offer
}

// remember notes an offer until its report. When the bound is reached it
// forgets offers past offerTTL, and if none is, it refuses the new one
// (false: the pod gets a fresh address) rather than forget an offer whose
// report may still come: forged requests cannot push real offers out.
func (m *offers) remember(pod *corev1.Pod, ips []string, reclaim ...returns.Predecessor) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if m.byUID == nil {
		m.byUID = map[types.UID]offer{}
	}
	if _, again := m.byUID[pod.UID]; !again && len(m.byUID) >= maxOffered {
		for uid, o := range m.byUID {
			if now.Sub(o.at) > offerTTL {
				delete(m.byUID, uid)
			}
		}
		if len(m.byUID) >= maxOffered {
			return false
		}
	}
	m.byUID[pod.UID] = offer{pod: pod, ips: ips, reclaim: reclaim, at: now}
	return true
}

// take is the offer made to the pod uid covering every one of ips,
// forgotten as it is read; false when the agent made no such offer.
func (m *offers) take(uid string, ips []string) (offer, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.byUID[types.UID(uid)]
	if !ok || len(ips) == 0 || slices.ContainsFunc(ips, func(ip string) bool { return !slices.Contains(o.ips, ip) }) {
		return offer{}, false
	}
	delete(m.byUID, types.UID(uid))
	return o, true
}
