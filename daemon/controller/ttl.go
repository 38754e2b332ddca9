package controller

import (
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/release"
)

// badTTL is a TTLAnnotation the planner ignores, and the object to tell.
type badTTL struct {
	obj   runtime.Object
	key   string // kind/namespace/name
	value string
	err   error
}

// ttls reads the valid TTLAnnotation values of the cached pods,
// StatefulSets and namespaces, and returns the invalid ones apart.
func (c *caches) ttls() (release.TTLs, []badTTL) {
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
	}
	for _, p := range kubeclient.Listed[corev1.Pod](c.pods.GetStore().List()) {
		key := p.Namespace + "/" + p.Name
		read(p, "Pod/"+key, p.Annotations, func(d time.Duration) { t.Pods[key] = d })
	}
	return t, bad
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
		c.recorder.Eventf(b.obj, corev1.EventTypeWarning, "InvalidReservationTime", "%v: ignored, the reservation time comes from the next level (StatefulSet, namespace, then ipReserveTime)", b.err)
		slog.Warn("invalid reservation time annotation ignored", "object", b.key, "value", b.value, "err", b.err)
	}
	c.badTTLs = now
}
