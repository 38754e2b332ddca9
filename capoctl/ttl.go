package capoctl

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
)

// ttlLookup reads the reservation time annotations of the objects the
// entries name, each object once, as the controller's caches hold them.
type ttlLookup struct {
	c       *cli
	ttls    release.TTLs
	invalid map[string]string // "<kind> <namespace/name>" -> why it is ignored
	read    map[string]bool
}

func (c *cli) ttlLookup() *ttlLookup {
	return &ttlLookup{c: c, invalid: map[string]string{}, read: map[string]bool{}, ttls: release.TTLs{
		Pods: map[string]time.Duration{}, Sets: map[release.OwnerKey]time.Duration{}, Namespaces: map[string]time.Duration{},
	}}
}

// of is e's reservation time and where it comes from ("config",
// "statefulset", ...).
func (l *ttlLookup) of(e reserve.Entry) (time.Duration, string) {
	if e.Namespace != "" {
		l.load("Namespace", "", e.Namespace, func(d time.Duration) { l.ttls.Namespaces[e.Namespace] = d })
	}
	if e.Pod != "" {
		l.load("Pod", e.Namespace, e.Pod, func(d time.Duration) { l.ttls.Pods[e.Namespace+"/"+e.Pod] = d })
	}
	if e.OwnerKind == "StatefulSet" {
		k := release.OwnerKey{Kind: e.OwnerKind, Namespace: e.Namespace, Name: e.OwnerName}
		l.load("StatefulSet", e.Namespace, e.OwnerName, func(d time.Duration) { l.ttls.Sets[k] = d })
	}
	return l.ttls.TTLOf(e, l.c.config().IPReserveTime)
}

// load reads one object's annotation; a missing object has none.
func (l *ttlLookup) load(kind, ns, name string, set func(time.Duration)) {
	key := kind + " " + ns + "/" + name
	if l.read[key] {
		return
	}
	l.read[key] = true
	var ann map[string]string
	ctx, get := l.c.ctx, metav1.GetOptions{}
	switch kind {
	case "Namespace":
		if o, err := l.c.kube.CoreV1().Namespaces().Get(ctx, name, get); err == nil {
			ann = o.Annotations
		}
	case "Pod":
		if o, err := l.c.kube.CoreV1().Pods(ns).Get(ctx, name, get); err == nil {
			ann = o.Annotations
		}
	case "StatefulSet":
		if o, err := l.c.kube.AppsV1().StatefulSets(ns).Get(ctx, name, get); err == nil {
			ann = o.Annotations
		}
	}
	v, ok := ann[release.TTLAnnotation]
	if !ok {
		return
	}
	d, err := release.ParseTTL(v)
	if err != nil {
		l.invalid[key] = err.Error()
		return
	}
	// As the controller does: the operator's maxIPReserveTime caps it.
	d, _ = l.c.config().CapReserveTime(d)
	set(d)
}

// source says where a reservation time comes from, in words.
func source(from string, ttl time.Duration) string {
	if from == release.FromConfig {
		return fmt.Sprintf("%s (ipReserveTime)", ttl)
	}
	return fmt.Sprintf("%s (%s %s)", ttl, from, release.TTLAnnotation)
}

// explainPolicy says what a scale-down below the pod's ordinal, and a
// re-creation of its StatefulSet, do to its reservation.
func (c *cli) explainPolicy(e reserve.Entry) {
	if e.OwnerKind != "StatefulSet" {
		return
	}
	set, err := c.kube.AppsV1().StatefulSets(e.Namespace).Get(c.ctx, e.OwnerName, metav1.GetOptions{})
	if err != nil {
		return
	}
	keep := func(key string, ann map[string]string, what string) bool {
		k, err := release.ParseKeep(key, ann[key])
		if err != nil {
			fmt.Fprintf(c.out, "  WARNING: %s: %v; ignored\n", what, err)
		}
		return k
	}
	if keep(release.ScaleDownAnnotation, set.Annotations, "StatefulSet "+e.OwnerName) {
		fmt.Fprintf(c.out, "  a scale-down that removes it keeps it held, for the scale-up (StatefulSet %s: %s=%s)\n", e.OwnerName, release.ScaleDownAnnotation, release.Keep)
	} else {
		fmt.Fprintf(c.out, "  a scale-down that removes it releases it at once (StatefulSet %s: %s=%s to keep it)\n", e.OwnerName, release.ScaleDownAnnotation, release.Keep)
	}
	var nsAnn map[string]string
	if ns, err := c.kube.CoreV1().Namespaces().Get(c.ctx, e.Namespace, metav1.GetOptions{}); err == nil {
		nsAnn = ns.Annotations
	}
	switch {
	case keep(release.RecreateAnnotation, set.Annotations, "StatefulSet "+e.OwnerName):
		fmt.Fprintf(c.out, "  if StatefulSet %s is deleted and re-created under its name, it keeps it for its pod (StatefulSet: %s=%s, the re-created one too)\n", e.OwnerName, release.RecreateAnnotation, release.Keep)
	case keep(release.RecreateAnnotation, nsAnn, "namespace "+e.Namespace):
		fmt.Fprintf(c.out, "  if StatefulSet %s is deleted and re-created under its name, it keeps it for its pod (namespace: %s=%s)\n", e.OwnerName, release.RecreateAnnotation, release.Keep)
	default:
		fmt.Fprintf(c.out, "  if StatefulSet %s is deleted, it is released (%s=%s on it or its namespace to keep it for a re-created one)\n", e.OwnerName, release.RecreateAnnotation, release.Keep)
	}
}
