package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
)

// badTTL is an annotation of capo's policy (TTLAnnotation,
// ScaleDownAnnotation) the planner ignores, and the object to tell.
type badTTL struct {
	obj    runtime.Object
	key    string // kind/namespace/name
	value  string
	err    error
	capped time.Duration // a valid time above maxIPReserveTime, held for this instead
}

// policy puts the workloads' own rules into w: the valid TTLAnnotation
// values of the cached pods, StatefulSets and namespaces, each cut to the
// operator's maxIPReserveTime (cfg), and the StatefulSets'
// ScaleDownAnnotation; it returns the invalid and the cut ones apart.
// Owners of the watched kinds beyond apps/v1 (others) count as a set.
func (c *caches) policy(w *release.World, cfg *config.Config, others []ownerPolicy) []badTTL {
	t := release.TTLs{Pods: map[string]time.Duration{}, Sets: map[release.OwnerKey]time.Duration{}, Namespaces: map[string]time.Duration{}}
	r := &policyReader{cfg: cfg}
	w.RecreateNamespaces, w.RecreateSets = map[string]bool{}, map[release.OwnerKey]bool{}
	for _, ns := range kubeclient.Listed[corev1.Namespace](c.namespaces.GetStore().List()) {
		r.ttl(ns, "Namespace/"+ns.Name, ns.Annotations, func(d time.Duration) { t.Namespaces[ns.Name] = d })
		if r.keep(ns, "Namespace/"+ns.Name, ns.Annotations, release.RecreateAnnotation) {
			w.RecreateNamespaces[ns.Name] = true
		}
	}
	for _, s := range kubeclient.Listed[appsv1.StatefulSet](c.sets.GetStore().List()) {
		k := release.OwnerKey{Kind: "StatefulSet", Namespace: s.Namespace, Name: s.Name}
		key := "StatefulSet/" + s.Namespace + "/" + s.Name
		r.ttl(s, key, s.Annotations, func(d time.Duration) { t.Sets[k] = d })
		if o, ok := w.Owners[k]; r.keep(s, key, s.Annotations, release.ScaleDownAnnotation) && ok && o.UID == string(s.UID) {
			o.KeepScaledDown = true
			w.Owners[k] = o
		}
		// A set being deleted counts too: the controller remembers it.
		if r.keep(s, key, s.Annotations, release.RecreateAnnotation) {
			w.RecreateSets[k] = true
		}
	}
	for _, o := range others {
		key := o.key.Kind + "/" + o.key.Namespace + "/" + o.key.Name
		r.ttl(o.obj, key, o.annotations, func(d time.Duration) { t.Sets[o.key] = d })
		if r.keep(o.obj, key, o.annotations, release.RecreateAnnotation) {
			w.RecreateSets[o.key] = true
		}
	}
	annotated, _ := c.pods.GetIndexer().ByIndex(byTTL, byTTL)
	for _, p := range kubeclient.Listed[corev1.Pod](annotated) {
		key := p.Namespace + "/" + p.Name
		r.ttl(p, "Pod/"+key, p.Annotations, func(d time.Duration) { t.Pods[key] = d })
	}
	w.TTLs = t
	return r.bad
}

// policyReader reads one pass's policy annotations, and keeps apart what
// is wrong with them.
type policyReader struct {
	cfg *config.Config
	bad []badTTL
}

// ttl hands set the object's TTLAnnotation, if valid, cut to
// maxIPReserveTime.
func (r *policyReader) ttl(obj runtime.Object, key string, ann map[string]string, set func(time.Duration)) {
	v, ok := ann[release.TTLAnnotation]
	if !ok {
		return
	}
	d, err := release.ParseTTL(v)
	if err != nil {
		r.bad = append(r.bad, badTTL{obj: obj, key: key, value: v, err: err})
		return
	}
	if capped, cut := r.cfg.CapReserveTime(d); cut {
		r.bad = append(r.bad, badTTL{obj: obj, key: key, value: v, capped: capped})
		d = capped
	}
	set(d)
}

// keep reads one of the keep annotations (ScaleDownAnnotation,
// RecreateAnnotation); an invalid one reads as not kept.
func (r *policyReader) keep(obj runtime.Object, key string, ann map[string]string, annotation string) bool {
	k, err := release.ParseKeep(annotation, ann[annotation])
	if err != nil {
		r.bad = append(r.bad, badTTL{obj: obj, key: key + "/" + annotation, value: ann[annotation], err: err})
	}
	return k
}

// reportBadTTLs warns once per object and value with an Event on the
// object (kubectl describe shows it) and a log line; a corrected or removed
// annotation may be wrong again later and is then told again.
func (rel *releaser) reportBadTTLs(bad []badTTL) {
	rel.mu.Lock()
	defer rel.mu.Unlock()
	now := map[string]string{}
	for _, b := range bad {
		seen := b.value
		if b.capped > 0 {
			seen += " capped at " + b.capped.String() // a new cap is told again
		}
		now[b.key] = seen
		if rel.badTTLs[b.key] == seen {
			continue
		}
		if b.capped > 0 {
			rel.recorder.Eventf(b.obj, corev1.EventTypeWarning, "ReservationTimeCapped", "%s=%s is above the cluster's maxIPReserveTime: addresses are held for %s at most", release.TTLAnnotation, b.value, b.capped)
			slog.Warn("a reservation time annotation is above maxIPReserveTime: cut", "object", b.key, "value", b.value, "heldFor", b.capped)
			continue
		}
		if strings.HasSuffix(b.key, "/"+release.ScaleDownAnnotation) || strings.HasSuffix(b.key, "/"+release.RecreateAnnotation) {
			rel.recorder.Eventf(b.obj, corev1.EventTypeWarning, "InvalidReservationPolicy", "%v: ignored, as if %s", b.err, release.ReleaseNow)
		} else {
			rel.recorder.Eventf(b.obj, corev1.EventTypeWarning, "InvalidReservationTime", "%v: ignored, the reservation time comes from the next level (StatefulSet, namespace, then ipReserveTime)", b.err)
		}
		slog.Warn("invalid reservation time annotation ignored", "object", b.key, "value", b.value, "err", b.err)
	}
	rel.badTTLs = now
}

// byTTL indexes the pods that carry a TTLAnnotation, under one key: a
// pass reads those, not every pod of the cluster.
const byTTL = "ttl"

func indexByTTL(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		if _, set := p.Annotations[release.TTLAnnotation]; set {
			return []string{byTTL}, nil
		}
	}
	return nil, nil
}

// noteSet remembers whether a StatefulSet, as last seen (created,
// changed, or deleted), opts in to keeping its members across a
// re-creation: once it is deleted its annotation is gone with it. Every
// replica notes it from its own informer, so a new leader remembers what
// it saw while standing by.
func (rel *releaser) noteSet(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	s, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return
	}
	k := release.OwnerKey{Kind: "StatefulSet", Namespace: s.Namespace, Name: s.Name}
	keep, _ := release.ParseKeep(release.RecreateAnnotation, s.Annotations[release.RecreateAnnotation])
	rel.mu.Lock()
	defer rel.mu.Unlock()
	if rel.recreatable == nil {
		rel.recreatable = map[release.OwnerKey]time.Time{}
	}
	if keep {
		rel.recreatable[k] = rel.now()
	} else {
		delete(rel.recreatable, k)
	}
}

// recallRecreatable keeps w.RecreateSets across a StatefulSet's deletion:
// the sets noted opting in are remembered, so that their members'
// reservations wait for the re-creation. A set of the name that exists
// without the opt-in ends the memory; so does MaxTTL.
func (rel *releaser) recallRecreatable(w *release.World) {
	rel.mu.Lock()
	defer rel.mu.Unlock()
	if rel.recreatable == nil {
		rel.recreatable = map[release.OwnerKey]time.Time{}
	}
	now := rel.now()
	for k := range w.RecreateSets {
		rel.recreatable[k] = now
	}
	for k, o := range w.Owners {
		if o.StatefulSet && !w.RecreateSets[k] {
			delete(rel.recreatable, k)
		}
	}
	for k, at := range rel.recreatable {
		if now.Sub(at) > release.MaxTTL {
			delete(rel.recreatable, k)
			continue
		}
		w.RecreateSets[k] = true
	}
}

// reown hands the kept members of re-created StatefulSets that keep them
// to the new set, so that its pods get their addresses back (capo-agent
// matches a returning pod by its set's UID).
func (rel *releaser) reown(ctx context.Context, kept []reserve.Entry, w release.World) error {
	var errs []error
	for uid, refs := range release.Reowns(kept, w) {
		if err := rel.store.Reown(ctx, refs, uid); err != nil {
			errs = append(errs, fmt.Errorf("handing %d reservations to the re-created StatefulSet %s: %w", len(refs), uid, err))
			continue
		}
		slog.Info("reservations handed to a re-created StatefulSet", "uid", uid, "count", len(refs))
	}
	return errors.Join(errs...)
}
