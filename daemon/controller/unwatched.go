package controller

import (
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/owners"
	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
)

// reportUnwatched tells, once per reservation and reason, that a member's
// owner is of a kind capo cannot watch (not served, no RBAC): its
// reservation is never ended as owner-gone or scaled-down, only by its
// time. The Event goes to the owner and, if it is there, the member.
func (rel *releaser) reportUnwatched(entries []reserve.Entry, unwatched map[string]unwatchedKind) {
	rel.mu.Lock()
	defer rel.mu.Unlock()
	told := map[reserve.Ref]string{}
	for _, e := range entries {
		u, ok := unwatched[e.OwnerKind]
		if !ok || u.why == notListed {
			continue // a watch starting tells nothing yet
		}
		told[e.Ref()] = u.why
		if rel.unwatchedTold[e.Ref()] == u.why {
			continue
		}
		slog.Warn("a reserved member's owner is of a kind capo cannot watch: the reservation stays until its time, never ended as owner-gone or scaled-down",
			"ip", e.IP, "pod", e.Namespace+"/"+e.Pod, "owner", u.kind.String()+" "+e.Namespace+"/"+e.OwnerName, "why", u.why)
		const msg = "capo cannot watch %s (%s): the reservation of %s for %s/%s stays until its reservation time and is not ended when its owner is deleted or scaled down; install the kind, or grant capo-controller get, list and watch on it (the chart's ownerKinds)"
		owner := &corev1.ObjectReference{Kind: u.kind.Kind, APIVersion: u.kind.GroupVersion().String(), Namespace: e.Namespace, Name: e.OwnerName, UID: types.UID(e.OwnerUID)}
		rel.recorder.Eventf(owner, corev1.EventTypeWarning, "OwnerNotWatched", msg, u.kind, u.why, e.IP, e.Namespace, e.Pod)
		if p := rel.caches.pod(e.Namespace, e.Pod); p != nil {
			rel.recorder.Eventf(p, corev1.EventTypeWarning, "OwnerNotWatched", msg, u.kind, u.why, e.IP, e.Namespace, e.Pod)
		}
	}
	rel.unwatchedTold = told
}

// watchOwners keeps the watches of owner kinds beyond apps/v1 in step with
// the config, and adds what they hold to w.
func (rel *releaser) watchOwners(w *release.World, listed []owners.Kind) map[string]unwatchedKind {
	rel.owners.sync(listed, rel.now())
	return rel.owners.addTo(w)
}
