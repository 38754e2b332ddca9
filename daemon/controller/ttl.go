package controller

import (
	"log/slog"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/release"
)

// badTTL is an annotation of capo's policy (TTLAnnotation,
// ScaleDownAnnotation) the planner ignores, and the object to tell.
type badTTL struct {
	obj   runtime.Object
	key   string // kind/namespace/name
	value string
	err   error
}

// policy puts the workloads' own rules into w: the valid TTLAnnotation
// values of the cached pods, StatefulSets and namespaces, and the
// StatefulSets' ScaleDownAnnotation; it returns the invalid ones apart.
func (c *caches) policy(w *release.World) []badTTL {
	t := release.TTLs{Pods: map[string]time.Duration{}, Sets: map[release.OwnerKey]time.Duration{}, Namespaces: map[string]time.Duration{}}
	var bad []badTTL
	read := func(obj runtime.Object, key string, ann map[string]string, set func(time.Duration)) {
		v, ok := ann[release.TTLAnnotation]
		if !ok {
			return
		}
		d, err := release.ParseTTL(v)
		if err != nil {
			bad = append(bad, badTTL{obj: obj, key: key, value: v, err: err})
			return
		}
		set(d)
	}
	for _, ns := range kubeclient.Listed[corev1.Namespace](c.namespaces.GetStore().List()) {
		read(ns, "Namespace/"+ns.Name, ns.Annotations, func(d time.Duration) { t.Namespaces[ns.Name] = d })
	}
	for _, s := range kubeclient.Listed[appsv1.StatefulSet](c.sets.GetStore().List()) {
		k := release.OwnerKey{Kind: "StatefulSet", Namespace: s.Namespace, Name: s.Name}
		read(s, "StatefulSet/"+s.Namespace+"/"+s.Name, s.Annotations, func(d time.Duration) { t.Sets[k] = d })
		keep, err := release.ParseScaleDown(s.Annotations[release.ScaleDownAnnotation])
		if err != nil {
			bad = append(bad, badTTL{obj: s, key: "StatefulSet/" + s.Namespace + "/" + s.Name + "/scale-down", value: s.Annotations[release.ScaleDownAnnotation], err: err})
		}
		if o, ok := w.Owners[k]; ok && keep && o.UID == string(s.UID) {
			o.KeepScaledDown = true
			w.Owners[k] = o
		}
	}
	annotated, _ := c.pods.GetIndexer().ByIndex(byTTL, byTTL)
	for _, p := range kubeclient.Listed[corev1.Pod](annotated) {
		key := p.Namespace + "/" + p.Name
		read(p, "Pod/"+key, p.Annotations, func(d time.Duration) { t.Pods[key] = d })
	}
	w.TTLs = t
	return bad
}

// reportBadTTLs warns once per object and value with an Event on the
// object (kubectl describe shows it) and a log line; a corrected or removed
// annotation may be wrong again later and is then told again.
func (c *Controller) reportBadTTLs(bad []badTTL) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := map[string]string{}
	for _, b := range bad {
		now[b.key] = b.value
		if c.badTTLs[b.key] == b.value {
			continue
		}
		if strings.HasSuffix(b.key, "/scale-down") {
			c.recorder.Eventf(b.obj, corev1.EventTypeWarning, "InvalidReservationPolicy", "%v: ignored, a scale-down releases the removed members' addresses", b.err)
		} else {
			c.recorder.Eventf(b.obj, corev1.EventTypeWarning, "InvalidReservationTime", "%v: ignored, the reservation time comes from the next level (StatefulSet, namespace, then ipReserveTime)", b.err)
		}
		slog.Warn("invalid reservation time annotation ignored", "object", b.key, "value", b.value, "err", b.err)
	}
	c.badTTLs = now
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
