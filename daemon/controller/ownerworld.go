package controller

import (
	"fmt"
	"math"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/capo-net/capo/pkg/owners"
	"github.com/capo-net/capo/pkg/release"
)

// unwatchedKind is an owner kind capo cannot watch, and why.
type unwatchedKind struct {
	kind owners.Kind
	why  string
}

// addTo adds the owners of every kind watched to w, and marks their kinds
// tracked; the others it marks unwatched (but for judging older entries,
// a kind whose group is not served at all). It returns the kinds not
// watched, by key, and why: their members' reservations, and those of
// older entries that may be theirs, are never judged gone.
func (ws *ownerWatches) addTo(w *release.World) map[string]unwatchedKind {
	if ws == nil {
		return nil
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	unwatched := map[string]unwatchedKind{}
	for key, ow := range ws.byKey {
		ok, why := ow.watching()
		if !ok {
			unwatched[key] = unwatchedKind{kind: ow.kind, why: why}
			// A kind not installed has no object to own anything: an
			// older entry of a kind named alike is judged by the kind
			// that is (apps/v1); one of this kind by its time only.
			if ow.isAbsent() {
				continue
			}
			if w.UnwatchedKinds == nil {
				w.UnwatchedKinds = map[string]bool{}
			}
			w.UnwatchedKinds[key] = true
			continue
		}
		w.TrackedKinds[key] = true
		if w.StableKinds == nil {
			w.StableKinds = map[string]bool{}
		}
		w.StableKinds[key] = true
		for _, obj := range ow.inf.GetStore().List() {
			m, isMeta := obj.(metav1.Object)
			if !isMeta || m.GetDeletionTimestamp() != nil {
				continue // being deleted: its pods are going
			}
			o := release.Owner{UID: string(m.GetUID())}
			if u, isSet := obj.(*unstructured.Unstructured); isSet {
				o = kruiseOwner(u)
			}
			w.Owners[release.OwnerKey{Kind: key, Namespace: m.GetNamespace(), Name: m.GetName()}] = o
		}
	}
	return unwatched
}

// ownerPolicy is a watched owner's policy annotations, for the pass's
// policy: TTLAnnotation and RecreateAnnotation, as on an apps/v1 set.
type ownerPolicy struct {
	key         release.OwnerKey
	obj         runtime.Object
	annotations map[string]string
}

// policies lists the watched owners that carry capo's annotations.
func (ws *ownerWatches) policies() []ownerPolicy {
	if ws == nil {
		return nil
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var out []ownerPolicy
	for key, ow := range ws.byKey {
		if ok, _ := ow.watching(); !ok {
			continue
		}
		for _, obj := range ow.inf.GetStore().List() {
			m, isMeta := obj.(metav1.Object)
			ro, isObj := obj.(runtime.Object)
			if !isMeta || !isObj {
				continue
			}
			ann := m.GetAnnotations()
			if _, ttl := ann[release.TTLAnnotation]; !ttl && ann[release.RecreateAnnotation] == "" {
				continue
			}
			out = append(out, ownerPolicy{key: release.OwnerKey{Kind: key, Namespace: m.GetNamespace(), Name: m.GetName()}, obj: ro, annotations: ann})
		}
	}
	return out
}

// kruiseOwner reads an Advanced StatefulSet's members: spec.replicas
// (default 1), spec.ordinals.start and spec.reserveOrdinals. One whose
// reserveOrdinals do not parse is judged only gone or not, never scaled
// down: its members are not known.
func kruiseOwner(u *unstructured.Unstructured) release.Owner {
	o := release.Owner{UID: string(u.GetUID()), StatefulSet: true, Replicas: 1}
	if n, found, err := unstructured.NestedInt64(u.Object, "spec", "replicas"); found && err == nil {
		if o.Replicas, err = int32Of(n); err != nil {
			o.StatefulSet = false
		}
	}
	if n, found, err := unstructured.NestedInt64(u.Object, "spec", "ordinals", "start"); found && err == nil {
		if o.OrdinalStart, err = int32Of(n); err != nil {
			o.StatefulSet = false
		}
	}
	items, _, _ := unstructured.NestedSlice(u.Object, "spec", "reserveOrdinals")
	reserved, err := owners.ParseReserved(items)
	if err != nil {
		o.StatefulSet = false
	}
	o.Reserved = reserved
	o.KeepScaledDown, _ = release.ParseScaleDown(u.GetAnnotations()[release.ScaleDownAnnotation])
	return o
}

// trimKruiseSet keeps of an Advanced StatefulSet what kruiseOwner and the
// informer read: its metadata's identity and annotations, and its scale.
func trimKruiseSet(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(u.GetName())
	out.SetNamespace(u.GetNamespace())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetDeletionTimestamp(u.GetDeletionTimestamp())
	out.SetAnnotations(u.GetAnnotations())
	for _, f := range [][]string{{"replicas"}, {"reserveOrdinals"}, {"ordinals"}} {
		if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, append([]string{"spec"}, f...)...); found {
			_ = unstructured.SetNestedField(out.Object, v, append([]string{"spec"}, f...)...)
		}
	}
	return out, nil
}

// int32Of is n as the int32 the CRD declares; a value out of that range is
// not a set's members, so the set is judged only gone or not.
func int32Of(n int64) (int32, error) {
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%d is out of int32's range", n)
	}
	return int32(n), nil
}
