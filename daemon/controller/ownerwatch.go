package controller

import (
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/capo-net/capo/pkg/owners"
)

// OwnerClients reach owner kinds other than apps/v1's: Kruise's Advanced
// StatefulSet through a dynamic informer (its scale is in spec), listed
// kinds through metadata-only informers (a kind's objects cost their
// metadata only, and a kind not served costs nothing).
type OwnerClients struct {
	Discovery discovery.DiscoveryInterface
	Dynamic   dynamic.Interface
	Metadata  metadata.Interface
}

// ownerRetry is how often a kind capo cannot watch is tried again: a CRD
// installed, or RBAC granted, after capo-controller started.
const ownerRetry = 30 * time.Second

// notListed: a watch started, its first list not done.
const notListed = "not listed yet"

// ownerWatch follows one owner kind. Until its informer has listed, or
// while its list or watch fails, the kind is not watched: its members'
// reservations are never judged owner-gone, only by their time.
type ownerWatch struct {
	kind owners.Kind
	inf  cache.SharedIndexInformer
	gvr  schema.GroupVersionResource // the resource inf watches, read live too (liveowners.go)
	stop chan struct{}

	mu     sync.Mutex
	why    string // why the kind is not watched; "" once listed
	absent bool   // its group is served in no version: no object of it exists
	errRV  string // the informer's resource version when it failed
	tried  time.Time
}

// ownerWatches are the watches of Kruise's StatefulSet and the listed
// kinds, started and stopped as the config lists them.
type ownerWatches struct {
	clients OwnerClients
	mu      sync.Mutex
	byKey   map[string]*ownerWatch
}

// newOwnerWatches is nil (nothing beyond apps/v1 watched) without a
// discovery client: tests of the rest.
func newOwnerWatches(c OwnerClients) *ownerWatches {
	if c.Discovery == nil {
		return nil
	}
	return &ownerWatches{clients: c, byKey: map[string]*ownerWatch{}}
}

// sync watches Kruise's StatefulSet and listed: it stops the watches of
// kinds no longer listed, and (re)tries the kinds it cannot watch yet.
func (ws *ownerWatches) sync(listed []owners.Kind, now time.Time) {
	if ws == nil {
		return
	}
	want := map[string]owners.Kind{owners.KruiseStatefulSet.Key(): owners.KruiseStatefulSet}
	for _, k := range listed {
		want[k.Key()] = k
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for key, w := range ws.byKey {
		if k, ok := want[key]; !ok || k != w.kind {
			w.close()
			delete(ws.byKey, key)
		}
	}
	for key, k := range want {
		w := ws.byKey[key]
		if w == nil {
			w = &ownerWatch{kind: k, why: notListed}
			ws.byKey[key] = w
		}
		if w.inf == nil && now.Sub(w.tried) >= ownerRetry {
			w.tried = now
			ws.start(w)
		}
	}
}

// start finds w's resource through discovery and runs its informer.
func (ws *ownerWatches) start(w *ownerWatch) {
	gvr, err := resourceOf(ws.clients.Discovery, w.kind)
	if err != nil {
		absent := groupAbsent(ws.clients.Discovery, w.kind.Group)
		w.fail(err.Error())
		w.mu.Lock()
		w.absent = absent
		w.mu.Unlock()
		return
	}
	w.gvr = gvr
	if w.kind.Key() == owners.KruiseStatefulSet.Key() {
		w.inf = dynamicinformer.NewFilteredDynamicInformer(ws.clients.Dynamic, gvr, "", 0, cache.Indexers{}, nil).Informer()
		_ = w.inf.SetTransform(trimKruiseSet)
	} else {
		w.inf = metadatainformer.NewFilteredMetadataInformer(ws.clients.Metadata, gvr, "", 0, cache.Indexers{}, nil).Informer()
		_ = w.inf.SetTransform(stripManagedFields)
	}
	_ = w.inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		if denied(err) {
			w.fail(fmt.Sprintf("listing or watching %s failed: %v", gvr.String(), err))
		}
	})
	w.stop = make(chan struct{})
	go w.inf.Run(w.stop)
}

// resourceOf is the resource serving k, or why there is none.
func resourceOf(d discovery.DiscoveryInterface, k owners.Kind) (schema.GroupVersionResource, error) {
	gv := k.GroupVersion()
	list, err := d.ServerResourcesForGroupVersion(gv.String())
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("%s is not served (%v)", k, err)
	}
	for _, r := range list.APIResources {
		if r.Kind != k.Kind || strings.Contains(r.Name, "/") || (k.Resource != "" && r.Name != k.Resource) {
			continue
		}
		if err := scopeError(k, r); err != nil {
			return schema.GroupVersionResource{}, err
		}
		return gv.WithResource(r.Name), nil
	}
	return schema.GroupVersionResource{}, fmt.Errorf("%s is not served: %s has no such kind", k, gv)
}

// groupAbsent reports whether discovery, asked for every group, serves
// none of this name: the kind is not installed (Kruise's, in most
// clusters), so no object of it exists to own anything. A discovery that
// fails says nothing: false.
func groupAbsent(d discovery.DiscoveryInterface, group string) bool {
	groups, err := d.ServerGroups()
	if err != nil || groups == nil {
		return false
	}
	for _, g := range groups.Groups {
		if g.Name == group {
			return false
		}
	}
	return true
}

// isAbsent: the kind's group is not served at all (see groupAbsent).
func (w *ownerWatch) isAbsent() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inf == nil && w.absent
}

// denied: the API server will not list or watch the kind (no RBAC, not
// served any more), as opposed to a watch that expired or a connection
// lost, which the informer recovers from by itself.
func denied(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err)
}

func (w *ownerWatch) fail(why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.why = why
	if w.inf != nil {
		w.errRV = w.inf.LastSyncResourceVersion()
	}
}

// watching reports whether w's store is the kind as the API server has
// it, or why not: listed, and no failure since its last progress.
func (w *ownerWatch) watching() (bool, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inf == nil {
		return false, w.why
	}
	if !w.inf.HasSynced() {
		if w.why == "" {
			return false, notListed
		}
		return false, w.why
	}
	if w.why != "" && w.inf.LastSyncResourceVersion() == w.errRV {
		return false, w.why
	}
	w.why = ""
	return true, ""
}

func (w *ownerWatch) close() {
	if w.stop != nil {
		close(w.stop)
	}
}

// waitListed waits, up to timeout, for the watches started to list, or to
// fail (forbidden, not served: they will not list soon): the first pass
// judges their members with their owners known.
func (ws *ownerWatches) waitListed(timeout time.Duration) {
	if ws == nil {
		return
	}
	ws.mu.Lock()
	var synced []cache.InformerSynced
	for _, w := range ws.byKey {
		if w.inf != nil {
			synced = append(synced, func() bool { ok, why := w.watching(); return ok || why != notListed })
		}
	}
	ws.mu.Unlock()
	stop := make(chan struct{})
	t := time.AfterFunc(timeout, func() { close(stop) })
	defer t.Stop()
	cache.WaitForCacheSync(stop, synced...)
}

// closeAll stops every watch.
func (ws *ownerWatches) closeAll() {
	if ws == nil {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for key, w := range ws.byKey {
		w.close()
		delete(ws.byKey, key)
	}
}
