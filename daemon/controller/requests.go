package controller

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/pause"
	"github.com/capo-net/capo/pkg/reserve"
)

// DefaultReleaseConfigMap is the ConfigMap, in the controller's namespace,
// through which an operator asks for a release by hand: each key a node's
// name, each value what to release there ("all", "pod=<namespace>/<name>",
// or addresses separated by commas). The controller removes a key once it
// has answered it. Requests live in capo's own namespace, not on the Node
// objects, so that the controller needs no write to Nodes.
const DefaultReleaseConfigMap = "capo-release"

// LegacyReleaseAnnotation is where release requests were read from before
// they moved to the ConfigMap: a Node carrying it is told, once, that it is
// no longer read.
const LegacyReleaseAnnotation = "capo.io/release"

// newRequests watches the one release ConfigMap.
func newRequests(kube kubernetes.Interface, namespace, name string) cache.SharedIndexInformer {
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	return f.Core().V1().ConfigMaps().Informer()
}

// request is one node's release by hand, as read.
type request struct{ node, value string }

// requests are this pass's releases by hand: what they release, and
// when each was first seen, to keep once they are answered (answered).
type requests struct {
	asked []request
	seen  map[request]time.Time
}

// manualRequests turns the release ConfigMap's keys into reservations (an
// address of that node). A request is applied once: to what capo held
// when it was first seen and was reserved by the time it was given,
// never to teardowns after it, however long its key stays (its clear
// refused, another replica leading meanwhile): a key left in place must
// not release every new teardown it matches. A request
// that matches nothing is said (an Event on the ConfigMap, and the log),
// not dropped in silence: the operator may have mistyped.
func (rel *releaser) manualRequests(entries []reserve.Entry) (map[reserve.Ref]bool, requests) {
	manual := map[reserve.Ref]bool{}
	rel.warnLegacyRequests()
	cm := rel.releaseConfigMap()
	if cm == nil {
		return manual, requests{}
	}
	now := rel.now()
	rs := requests{seen: map[request]time.Time{}}
	for node, v := range cm.Data {
		r := request{node, v}
		at, answered := rel.requestsSeen[r]
		if !answered {
			at = now
		}
		rs.asked, rs.seen[r] = append(rs.asked, r), at
		asked := rel.askedBy(cm, r, now)
		matched := 0
		for _, e := range entries {
			if e.Node == node && matchesManual(v, e) && (!answered || heldSince(e, at)) && reservedBy(e, asked) {
				manual[e.Ref()] = true
				matched++
			}
		}
		if matched == 0 && !answered {
			rel.recorder.Eventf(cm, corev1.EventTypeWarning, "ReleaseMatchedNothing", "%s: %q matches no address capo holds for node %s; see kubectl capo list --node %s", node, v, node, node)
			slog.Warn("a release by hand matched nothing", "node", node, "request", v)
		}
	}
	sort.Slice(rs.asked, func(i, j int) bool { return rs.asked[i].node < rs.asked[j].node })
	return manual, rs
}

// matchesManual: "all", "pod=<namespace>/<name>", or addresses (any
// spelling: fd00:0::1, FD00::1 and fd00::1/128 are one address; a wider
// CIDR held as added by hand is named by itself).
func matchesManual(v string, e reserve.Entry) bool {
	v = strings.TrimSpace(v)
	switch {
	case v == "all":
		return true
	case strings.HasPrefix(v, "pod="):
		return strings.TrimPrefix(v, "pod=") == e.Namespace+"/"+e.Pod
	}
	for _, ip := range strings.Split(v, ",") {
		// As values: "fd00:0::1" and "fd00::1/128" name the held fd00::1.
		if addr, err := reserve.NormalizeAddr(ip); err == nil && addr == e.IP {
			return true
		}
	}
	return false
}

// ReleaseSeenAnnotation, on the release ConfigMap, keeps when a replica's
// watch first showed each request, for the replicas that start after it:
// a JSON object of node -> {"value", "seen"}. A replica that starts after
// a request was given first shows it late, and the API server's record of
// the key's write (managed fields) moves with every later write of the
// same manager (kubectl patching another node's key): neither bounds the
// request alone. A stamp for another value than the key holds now says
// nothing of it.
const ReleaseSeenAnnotation = "capo.io/release-seen"

// seenStamp is a request's value and when a replica's watch first showed it.
type seenStamp struct {
	Value string    `json:"value"`
	Seen  time.Time `json:"seen"`
}

// seenStamps reads the ConfigMap's stamps; an annotation that does not
// read is none (the replicas write it again).
func seenStamps(cm *corev1.ConfigMap) map[string]seenStamp {
	out := map[string]seenStamp{}
	if v, ok := cm.Annotations[ReleaseSeenAnnotation]; ok && json.Unmarshal([]byte(v), &out) != nil {
		return map[string]seenStamp{}
	}
	return out
}

// stampLoop keeps the release ConfigMap's stamps (ReleaseSeenAnnotation)
// up to date with this replica's first sights, leading or not, until ctx
// ends: a request's first stamp stays, one whose key is gone or changed
// goes.
func (rel *releaser) stampLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-rel.stampDue:
		}
		if err := rel.stamp(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("could not note when release requests were first seen; trying again", "configmap", rel.opts.Namespace+"/"+rel.opts.ReleaseConfigMap, "err", err)
			if pause.Sleep(ctx, 2*time.Second) {
				rel.poke()
			}
		}
	}
}

func (rel *releaser) poke() {
	select {
	case rel.stampDue <- struct{}{}:
	default:
	}
}

// stamp writes the stamps the ConfigMap lacks, once, on the version this
// replica read: a write refused for a newer version is left to that
// version's event.
func (rel *releaser) stamp(ctx context.Context) error {
	cm := rel.releaseConfigMap()
	if cm == nil {
		return nil
	}
	stamps := seenStamps(cm)
	next := map[string]seenStamp{}
	rel.mu.Lock()
	for node, v := range cm.Data {
		if s, ok := stamps[node]; ok && s.Value == v {
			next[node] = s
		} else if at, ok := rel.observed[request{node, v}]; ok {
			next[node] = seenStamp{Value: v, Seen: at.UTC()}
		}
	}
	rel.mu.Unlock()
	if maps.Equal(next, stamps) {
		return nil
	}
	var value any // null removes the annotation
	if len(next) > 0 {
		b, err := json.Marshal(next)
		if err != nil {
			return err
		}
		value = string(b)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": cm.ResourceVersion, // written on this version only
		"annotations":     map[string]any{ReleaseSeenAnnotation: value},
	}})
	if err != nil {
		return err
	}
	_, err = rel.kube.CoreV1().ConfigMaps(rel.opts.Namespace).Patch(ctx, rel.opts.ReleaseConfigMap, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // changed or gone since: its event comes
	}
	return err
}

// observe notes when this replica's watch of the release ConfigMap first
// showed each request, leading or not, whether its passes can run or not.
func (rel *releaser) observe(obj any) {
	defer rel.poke()
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	now := rel.now()
	rel.mu.Lock()
	defer rel.mu.Unlock()
	current := map[request]bool{}
	for node, v := range cm.Data {
		r := request{node, v}
		current[r] = true
		if _, seen := rel.observed[r]; !seen {
			rel.observed[r] = now
		}
	}
	maps.DeleteFunc(rel.observed, func(r request, _ time.Time) bool { return !current[r] })
}

// askedBy is the latest a request can have been given: the earliest of
// when the API server recorded its key written, when this replica's watch
// first showed it and when any replica's did (its stamp), or now. A
// request is first answered by the leader of the moment, which may be
// long after it was given (no replica leading, Calico's datastore
// locked, the last leader gone before clearing the key): what was
// reserved after it was given is not what it asked for.
func (rel *releaser) askedBy(cm *corev1.ConfigMap, r request, now time.Time) time.Time {
	at := now
	if w, ok := keyWritten(cm, r.node); ok && w.Before(at) {
		at = w
	}
	if s, ok := seenStamps(cm)[r.node]; ok && s.Value == r.value && !s.Seen.IsZero() && s.Seen.Before(at) {
		at = s.Seen
	}
	rel.mu.Lock()
	defer rel.mu.Unlock()
	if o, ok := rel.observed[r]; ok && o.Before(at) {
		at = o
	}
	return at
}

// keyWritten is when the request under key was last written, as the API
// server recorded it (the ConfigMap's managed fields: the latest write of
// a manager that owns the key). ok is false where the API server tracks
// none (a ConfigMap created empty is not tracked until applied).
func keyWritten(cm *corev1.ConfigMap, key string) (at time.Time, ok bool) {
	want := "f:" + key
	for _, m := range cm.ManagedFields {
		if m.Time == nil || m.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Data map[string]json.RawMessage `json:"f:data"`
		}
		if json.Unmarshal(m.FieldsV1.Raw, &fields) != nil {
			continue
		}
		if _, owns := fields.Data[want]; owns && m.Time.After(at) {
			at, ok = m.Time.Time, true
		}
	}
	return at, ok
}

// reservedBy: e was written by the time a request was (both to the
// second; an entry stamped in the request's second counts as asked for).
func reservedBy(e reserve.Entry, written time.Time) bool {
	return !e.ReservedAt.Truncate(time.Second).After(written.Truncate(time.Second))
}

// heldSince: e was held, as the controller saw it, by at (an entry not
// seen yet was written since the last pass, after at).
func heldSince(e reserve.Entry, at time.Time) bool {
	return !e.Seen.IsZero() && !e.Seen.After(at)
}

// answered remembers this pass's requests as applied, once their
// releases are written: a release that failed is asked again as new.
func (rel *releaser) answered(rs requests) { rel.requestsSeen = rs.seen }

func (rel *releaser) releaseConfigMap() *corev1.ConfigMap {
	for _, cm := range kubeclient.Listed[corev1.ConfigMap](rel.caches.requests.GetStore().List()) {
		return cm
	}
	return nil
}

// clearManual removes the answered requests' keys, each only while it still
// holds the request answered: a request changed since the read is left for
// the next pass.
func (rel *releaser) clearManual(ctx context.Context, asked []request) {
	for _, r := range asked {
		key := "/data/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(r.node)
		patch, _ := json.Marshal([]map[string]any{
			{"op": "test", "path": key, "value": r.value},
			{"op": "remove", "path": key},
		})
		if _, err := rel.kube.CoreV1().ConfigMaps(rel.opts.Namespace).Patch(ctx, rel.opts.ReleaseConfigMap, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
			slog.Warn("could not remove an answered release request; it is not applied again to what capo reserves after it (check that the controller's Role names this ConfigMap)", "configmap", rel.opts.Namespace+"/"+rel.opts.ReleaseConfigMap, "node", r.node, "err", err)
			continue
		}
		// Gone: the same request given again is a new one.
		delete(rel.requestsSeen, r)
	}
}

// warnLegacyRequests tells, once per node and value, that a release
// annotation on a Node is no longer read.
func (rel *releaser) warnLegacyRequests() {
	for _, n := range kubeclient.Listed[corev1.Node](rel.caches.nodes.GetStore().List()) {
		v, ok := n.Annotations[LegacyReleaseAnnotation]
		if !ok {
			continue
		}
		rel.mu.Lock()
		seen := rel.legacyWarned[n.Name] == v
		rel.legacyWarned[n.Name] = v
		rel.mu.Unlock()
		if seen {
			continue
		}
		rel.recorder.Eventf(n, corev1.EventTypeWarning, "ReleaseAnnotationIgnored",
			"%s on Nodes is no longer read: use kubectl capo release --node %s, or the key %q in ConfigMap %s/%s; remove this annotation",
			LegacyReleaseAnnotation, n.Name, n.Name, rel.opts.Namespace, rel.opts.ReleaseConfigMap)
		slog.Warn("a Node carries the old release annotation, which is no longer read", "node", n.Name, "request", v,
			"use", "ConfigMap "+rel.opts.Namespace+"/"+rel.opts.ReleaseConfigMap+" or kubectl capo release")
	}
}
