package release

import (
	"fmt"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

// TTLAnnotation on a Pod, its StatefulSet or its Namespace sets how long
// its addresses stay reserved, overriding ipReserveTime: the pod's wins,
// then the StatefulSet's, then the namespace's. A Go duration ("90m",
// "6h"). A value that does not parse or is out of range is ignored (the
// next level decides) and reported with an Event on its object.
const TTLAnnotation = "capo.io/ip-reserve-time"

// ScaleDownAnnotation on a StatefulSet set to Keep keeps the addresses of
// the members a scale-down removes held, within their reservation time, so
// that a scale-up gives each member its own back; "release", the default,
// ends them at once, as any address of a member that will not return.
const (
	ScaleDownAnnotation = "capo.io/ip-reserve-on-scale-down"
	Keep                = "keep"
	ReleaseNow          = "release"
)

// RecreateAnnotation set to Keep on a Namespace or a StatefulSet keeps
// the addresses of a StatefulSet deleted and re-created under the same
// name (a Helm reinstall, the orphan-and-recreate a volume claim template
// change needs): while no StatefulSet has the name, its members'
// reservations stay (within their reservation time) instead of ending as
// owner-gone, and the new StatefulSet takes them over, so that its members
// get their addresses back. The default, release, keeps today's rule: a
// new StatefulSet is a new owner and inherits nothing.
const RecreateAnnotation = "capo.io/ip-reserve-on-recreate"

// ParseKeep reads a Keep/ReleaseNow annotation value.
func ParseKeep(key, s string) (keep bool, err error) {
	switch s {
	case Keep:
		return true, nil
	case ReleaseNow, "":
		return false, nil
	}
	return false, fmt.Errorf("%s=%q: want %s or %s", key, s, Keep, ReleaseNow)
}

// ParseScaleDown reads a ScaleDownAnnotation value: keep reports whether
// it keeps.
func ParseScaleDown(s string) (keep bool, err error) { return ParseKeep(ScaleDownAnnotation, s) }

// TTL bounds: at least a second (0 would end a reservation at its first
// pass, which is opting out: say so with capo.io/ip-reserve=disabled), at
// most 30 days, a bound against a typo ("6000h") holding a pool's
// addresses for most of a year.
const (
	MinTTL = time.Second
	MaxTTL = 30 * 24 * time.Hour
)

// ParseTTL reads a TTLAnnotation value.
func ParseTTL(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s=%q is not a duration such as 90m or 6h", TTLAnnotation, s)
	case d < MinTTL || d > MaxTTL:
		return 0, fmt.Errorf("%s=%q is out of range: from %s to %s (to reserve nothing, use capo.io/ip-reserve=disabled)", TTLAnnotation, s, MinTTL, MaxTTL)
	}
	return d, nil
}

// TTLs are the valid TTLAnnotation values the cluster holds, by object.
// Pods are by "<namespace>/<name>": a StatefulSet's member comes back
// under its name, so its annotation still applies once the torn-down pod
// object is gone.
type TTLs struct {
	Pods       map[string]time.Duration
	Sets       map[OwnerKey]time.Duration // Kind is StatefulSet
	Namespaces map[string]time.Duration
}

// Where a reservation's TTL comes from.
const (
	FromConfig      = "config"
	FromPod         = "pod"
	FromStatefulSet = "statefulset"
	FromNamespace   = "namespace"
)

// TTLOf is how long e stays reserved, and which level says so.
func (t TTLs) TTLOf(e reserve.Entry, def time.Duration) (time.Duration, string) {
	if d, ok := t.Pods[e.Namespace+"/"+e.Pod]; ok && e.Pod != "" {
		return d, FromPod
	}
	if d, ok := t.Sets[OwnerKey{Kind: e.OwnerKind, Namespace: e.Namespace, Name: e.OwnerName}]; ok && e.OwnerKind != "" {
		return d, FromStatefulSet
	}
	if d, ok := t.Namespaces[e.Namespace]; ok && e.Namespace != "" {
		return d, FromNamespace
	}
	return def, FromConfig
}

// keepsAcrossRecreate reports whether e's StatefulSet (apps/v1, or a
// watched kind with stable identities: Kruise's, a listed one), by name,
// opts in to RecreateAnnotation, itself or through its namespace.
func (w World) keepsAcrossRecreate(e reserve.Entry) bool {
	return w.stableIdentities(e.OwnerKind) &&
		(w.RecreateNamespaces[e.Namespace] || w.RecreateSets[OwnerKey{Kind: e.OwnerKind, Namespace: e.Namespace, Name: e.OwnerName}])
}

// stableIdentities says whether kind's members keep their names: apps/v1
// StatefulSet, and the owner kinds beyond it that are watched.
func (w World) stableIdentities(kind string) bool {
	return kind == "StatefulSet" || w.StableKinds[kind]
}

// Reowns are the kept StatefulSet entries whose set was re-created under
// its name and keeps them: by the new set's UID, the entries to give it.
func Reowns(kept []reserve.Entry, w World) map[string][]reserve.Ref {
	out := map[string][]reserve.Ref{}
	stable := w.stableByUID()
	for _, e := range kept {
		e, judged := w.ownerKindOf(e, stable)
		if !judged {
			continue // its owner is not known: nothing to hand over
		}
		o, ok := w.Owners[OwnerKey{e.OwnerKind, e.Namespace, e.OwnerName}]
		if ok && (o.StatefulSet || w.StableKinds[e.OwnerKind]) && e.OwnerUID != "" && o.UID != e.OwnerUID && w.keepsAcrossRecreate(e) {
			out[o.UID] = append(out[o.UID], e.Ref())
		}
	}
	return out
}
