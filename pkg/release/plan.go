// Package release decides which reservations end, and why. It is pure:
// reservations, the time, the config and what the cluster holds go in; the
// releases come out, each with its reason.
package release

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/owners"
	"github.com/capo-net/capo/pkg/reserve"
)

// Reason is why a reservation ends; metrics and events carry it.
type Reason string

const (
	Manual        Reason = "manual"         // an operator asked
	NamespaceGone Reason = "namespace-gone" // the pod's namespace is deleted or terminating
	OwnerGone     Reason = "owner-gone"     // the workload is deleted, or replaced by a new object of the same name
	ScaledDown    Reason = "scaled-down"    // the StatefulSet no longer has the pod's ordinal (scaled down, or reserved by Kruise's reserveOrdinals; unless it keeps them: ScaleDownAnnotation)
	TTL           Reason = "ttl"            // older than ipReserveTime, or its workload's capo.io/ip-reserve-time
	MaxCount      Reason = "max-count"      // more held than ipReserveMaxCount: oldest first
)

// Reasons lists every reason, for metrics.
var Reasons = []Reason{Manual, NamespaceGone, OwnerGone, ScaledDown, TTL, MaxCount}

// OwnerKey names a workload.
type OwnerKey struct{ Kind, Namespace, Name string }

// Owner is what the cluster holds under an OwnerKey.
type Owner struct {
	UID string
	// ParentGone: a ReplicaSet whose Deployment is gone (orphaned on purpose
	// or not yet collected) no longer stands for a live workload.
	ParentGone bool
	// StatefulSet (apps/v1's or Kruise's) only: the pods that exist are
	// the first Replicas ordinals from OrdinalStart not in Reserved
	// (Kruise's reserveOrdinals). A listed owner kind whose scale capo
	// does not know is not one: its members end only with it.
	StatefulSet  bool
	Replicas     int32
	OrdinalStart int32
	Reserved     map[int]bool
	// KeepScaledDown: the StatefulSet opts in (ScaleDownAnnotation=keep)
	// to keep a removed member's addresses held, within its reservation
	// time, for the member to get back when the set scales up again.
	KeepScaledDown bool
}

// World is what the cluster holds, as the controller's caches see it.
type World struct {
	Namespaces map[string]bool // live (not terminating) namespaces
	Owners     map[OwnerKey]Owner
	// TrackedKinds are owner kinds (reserve.Entry.OwnerKind, owners.Key)
	// the controller watches and has read: owners of other kinds (Jobs, a
	// custom resource not listed, a listed one capo cannot watch) are
	// never judged gone.
	TrackedKinds map[string]bool
	// StableKinds are the tracked owner kinds beyond apps/v1 whose members
	// keep their names (<owner>-<ordinal>): Kruise's Advanced StatefulSet,
	// the listed ones. Their sets' policy is read as an apps/v1 set's.
	StableKinds map[string]bool
	// UnwatchedKinds are the owner kinds beyond apps/v1 capo is to watch
	// whose view is not synced and serving (not listed yet, forbidden, not
	// served), by key: an entry that may be of one is never judged by its
	// owner, only by its time.
	UnwatchedKinds map[string]bool
	Manual         map[reserve.Ref]bool // reservations an operator released: entries, or places (an address of one node)
	TTLs           TTLs                 // per-workload reservation times; Limits.TTL elsewhere
	// RecreateNamespaces and RecreateSets opt in to RecreateAnnotation:
	// namespaces, and StatefulSets by name (those that exist, and those the
	// controller saw with it before they were deleted).
	RecreateNamespaces map[string]bool
	RecreateSets       map[OwnerKey]bool
}

// Limits are the config's release rules.
type Limits struct {
	TTL      time.Duration
	MaxCount int
}

// Release is one reservation to end.
type Release struct {
	reserve.Entry
	Reason Reason
}

// Plan returns the reservations to release, each once, with the first rule
// that applies; the rest are kept. Max count is applied last, to what the
// other rules keep, oldest first (ties by address, so the plan is stable).
func Plan(entries []reserve.Entry, now time.Time, l Limits, w World) []Release {
	var out []Release
	var kept []reserve.Entry
	stable := w.stableByUID()
	for _, e := range entries {
		e, judged := w.ownerKindOf(e, stable)
		if r, ok := ruleFor(e, judged, now, l, w); ok {
			out = append(out, Release{Entry: e, Reason: r})
		} else {
			kept = append(kept, e)
		}
	}
	if over := len(kept) - l.MaxCount; over > 0 {
		slices.SortStableFunc(kept, func(a, b reserve.Entry) int {
			if c := Since(a, now).Compare(Since(b, now)); c != 0 {
				return c
			}
			// Not told apart by the controller's clock (none seen yet, or seen
			// in one pass): the writers' order, then the address.
			if c := a.ReservedAt.Compare(b.ReservedAt); c != 0 {
				return c
			}
			return strings.Compare(a.IP, b.IP)
		})
		for _, e := range kept[:over] {
			out = append(out, Release{Entry: e, Reason: MaxCount})
		}
	}
	return out
}

// stableByUID indexes the owners of the kinds beyond apps/v1 with stable
// identities by UID.
func (w World) stableByUID() map[string]OwnerKey {
	out := map[string]OwnerKey{}
	for k, o := range w.Owners {
		if w.StableKinds[k.Kind] && o.UID != "" {
			out[o.UID] = k
		}
	}
	return out
}

// ownerKindOf reads an entry written before capo told owner kinds apart by
// group (its kind "StatefulSet" for a member of Kruise's Advanced
// StatefulSet) as its owner's: no apps/v1 set of its name holds the UID it
// recorded, and a watched set of the name does. A UID names one object.
// judged is false when the owner cannot be told: no set capo sees holds
// the UID, and a kind named StatefulSet that may hold it is not watched
// (its watch has not listed yet, is forbidden, or its CRD is not served).
func (w World) ownerKindOf(e reserve.Entry, stable map[string]OwnerKey) (out reserve.Entry, judged bool) {
	if e.OwnerKind != "StatefulSet" || e.OwnerUID == "" {
		return e, true
	}
	if o, ok := w.Owners[OwnerKey{e.OwnerKind, e.Namespace, e.OwnerName}]; ok && o.UID == e.OwnerUID {
		return e, true
	}
	if k, ok := stable[e.OwnerUID]; ok && k.Namespace == e.Namespace && k.Name == e.OwnerName {
		e.OwnerKind = k.Kind
		return e, true
	}
	for key := range w.UnwatchedKinds {
		if kind, _, _ := strings.Cut(key, "."); kind == e.OwnerKind {
			return e, false
		}
	}
	return e, true
}

// ruleFor is the first rule that ends e; its owner's rules apply only when
// judged (see ownerKindOf).
func ruleFor(e reserve.Entry, judged bool, now time.Time, l Limits, w World) (Reason, bool) {
	switch {
	case w.Manual[e.Ref()] || w.Manual[e.Place()]:
		return Manual, true
	case e.Namespace != "" && w.Namespaces != nil && !w.Namespaces[e.Namespace]:
		return NamespaceGone, true
	}
	if judged && e.OwnerKind != "" && w.TrackedKinds[e.OwnerKind] {
		o, ok := w.Owners[OwnerKey{e.OwnerKind, e.Namespace, e.OwnerName}]
		recreated := e.OwnerUID != "" && o.UID != e.OwnerUID
		switch {
		case w.keepsAcrossRecreate(e) && (!ok || recreated && o.StatefulSet):
			// Awaiting its re-creation, or re-created: the time decides,
			// and the new set's ordinals.
			if ok && scaledDown(e, o) {
				return ScaledDown, true
			}
		case !ok || recreated || o.ParentGone:
			return OwnerGone, true
		case o.StatefulSet && scaledDown(e, o):
			return ScaledDown, true
		}
	}
	if ttl, _ := w.TTLs.TTLOf(e, l.TTL); now.Sub(Since(e, now)) >= ttl {
		return TTL, true
	}
	return "", false
}

// scaledDown reports whether the StatefulSet o no longer has e's ordinal
// and does not keep its removed members' addresses.
func scaledDown(e reserve.Entry, o Owner) bool {
	ord, ok := ordinal(e.Pod, e.OwnerName)
	return ok && !o.KeepScaledDown && !owners.Ordinals{Start: o.OrdinalStart, Replicas: o.Replicas, Reserved: o.Reserved}.Has(ord)
}

// Since is when an entry's age is counted from: when capo-controller first
// saw it, by its own clock, so that one clock judges every reservation
// whatever the clock of the node that wrote it says. An entry not seen yet
// (written since the last pass, or added by hand) is new.
func Since(e reserve.Entry, now time.Time) time.Time {
	if e.Seen.IsZero() {
		return now
	}
	return e.Seen
}

// ordinal is a StatefulSet pod's ordinal: "<set>-<n>".
func ordinal(pod, set string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, set+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}
