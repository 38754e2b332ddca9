package apigroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// LockedError is Calico's datastore locked: ClusterInformation default has
// datastoreReady false, as Calico sets it while it upgrades or migrates
// its datastore (its v1 to v3 migration locks crd.projectcalico.org/v1,
// drains for 10 s, then copies every resource to projectcalico.org/v3).
// A reservation written after the copy began would stay behind in the old
// group, where Calico no longer reads: capo writes none while locked.
type LockedError struct {
	Mode Mode
	// Unfollowed is why the lock cannot be followed (the watch of
	// ClusterInformation fails: RBAC, not served): as good as locked.
	Unfollowed error
}

func (e *LockedError) Error() string {
	if e.Unfollowed != nil {
		return fmt.Sprintf("capo cannot tell whether Calico's datastore (%s) is locked for an upgrade or migration, so it writes no reservation: watching ClusterInformation default: %v. "+
			"Grant capo get, list and watch on clusterinformations (the chart does)", e.Mode, e.Unfollowed)
	}
	return fmt.Sprintf("Calico's datastore (%s) is locked: ClusterInformation default has datastoreReady false, as Calico sets it while it upgrades or migrates its datastore. "+
		"capo writes no reservation until Calico unlocks it; capo-ipam journals teardowns and keeps their addresses allocated. "+
		"After a migration to %s, run capo in that group too, as Calico's components (%s=%s; the chart's calico.apiGroup)",
		e.Mode, GroupV3, EnvGroup, GroupV3)
}

// IsLocked tells a LockedError from other failures.
func IsLocked(err error) bool { return errors.As(err, new(*LockedError)) }

// Lock follows Calico's datastore lock in the mode in force. Until its
// first answer it says nothing (the daemons' first API check holds
// everything back anyway).
type Lock struct {
	mode     Mode
	onChange func()

	mu         sync.Mutex
	known      bool
	locked     bool
	unfollowed error // the watch's last failure, until it delivers again
}

// NewLock is a lock for m whose state is set by Set (a poll) or Watch.
// onChange, when set, runs after every change, so that a daemon can check
// at once rather than at its next probe.
func NewLock(m Mode, onChange func()) *Lock { return &Lock{mode: m, onChange: onChange} }

// Err is a *LockedError while Calico's datastore is locked.
func (l *Lock) Err() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.unfollowed != nil:
		return &LockedError{Mode: l.mode, Unfollowed: l.unfollowed}
	case l.locked:
		return &LockedError{Mode: l.mode}
	}
	return nil
}

// unfollow records a failed watch; nil clears it.
func (l *Lock) unfollow(err error) {
	l.mu.Lock()
	changed := (l.unfollowed == nil) != (err == nil)
	l.unfollowed = err
	l.mu.Unlock()
	if changed && err != nil {
		slog.Error("cannot follow Calico's datastore lock: no reservation is written until it can", "calico", l.mode.String(), "err", err)
	}
	if changed && l.onChange != nil {
		l.onChange()
	}
}

// Set records ClusterInformation default's datastoreReady. Absent (nil,
// or no ClusterInformation at all) is not locked: Calico locks by setting
// it false, and a datastore Calico never initialised has no IPAM to lose.
func (l *Lock) Set(ready *bool) {
	l.unfollow(nil)
	locked := ready != nil && !*ready
	l.mu.Lock()
	changed := !l.known || l.locked != locked
	l.known, l.locked = true, locked
	l.mu.Unlock()
	if !changed {
		return
	}
	if locked {
		slog.Warn("Calico locked its datastore (ClusterInformation datastoreReady false): no reservation is written until it unlocks", "calico", l.mode.String())
	} else {
		slog.Info("Calico's datastore is not locked (ClusterInformation datastoreReady)", "calico", l.mode.String())
	}
	if l.onChange != nil {
		l.onChange()
	}
}

// Watch follows ClusterInformation default in the mode's group through
// dyn until ctx ends: a lock is seen within a watch event, well inside
// the 10 s Calico waits after locking before it copies anything.
func (l *Lock) Watch(ctx context.Context, dyn dynamic.Interface) {
	gv, _ := schema.ParseGroupVersion(l.mode.Group)
	gvr := gv.WithResource(ClusterInformation.Resource(l.mode.Group))
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, gvr, "", 0, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=default"
	}).Informer()
	set := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		ready, found, _ := unstructured.NestedBool(u.Object, "spec", "datastoreReady")
		if !found {
			l.Set(nil)
			return
		}
		l.Set(&ready)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(any) { l.Set(nil) },
	})
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { l.unfollow(err) })
	go inf.Run(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) && len(inf.GetStore().List()) == 0 {
		l.Set(nil)
	}
}
