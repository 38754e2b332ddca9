package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"

	"github.com/capo-net/capo/pkg/calico/apigroup"
)

// LockedError is Calico's datastore locked: ClusterInformation default has
// datastoreReady false, as Calico sets it while it upgrades or migrates
// its datastore (its v1 to v3 migration locks crd.projectcalico.org/v1,
// drains for 10 s, then copies every resource to projectcalico.org/v3).
// A reservation written after the copy began would stay behind in the old
// group, where Calico no longer reads: capo writes none while locked.
type LockedError struct {
	Mode apigroup.Mode
	// Unfollowed is why the lock cannot be followed (the watch of
	// ClusterInformation fails: RBAC, not served): as good as locked.
	Unfollowed error
	// Absent: ClusterInformation default does not exist, so nothing says
	// whether Calico has locked its datastore. NotYet: not read yet.
	Absent, NotYet bool
}

func (e *LockedError) Error() string {
	switch {
	case e.Unfollowed != nil:
		return fmt.Sprintf("capo cannot tell whether Calico's datastore (%s) is locked for an upgrade or migration, so it writes no reservation: watching ClusterInformation default: %v. "+
			"Grant capo get, list and watch on clusterinformations (the chart does)", e.Mode, e.Unfollowed)
	case e.Absent:
		return fmt.Sprintf("ClusterInformation default does not exist in Calico's datastore (%s), so capo cannot tell whether Calico has locked it for an upgrade or migration, and writes no reservation; "+
			"Calico's own CNI plugin refuses to work without it too. calico-node creates it when it starts; if Calico runs, capo is reading another datastore or API group than Calico's: "+
			"check DATASTORE_TYPE and %s", e.Mode, apigroup.EnvGroup)
	case e.NotYet:
		return fmt.Sprintf("capo has not read Calico's ClusterInformation default (%s) yet, so it cannot tell whether Calico has locked its datastore: no reservation is written until it has", e.Mode)
	}
	return fmt.Sprintf("Calico's datastore (%s) is locked: ClusterInformation default has datastoreReady false, as Calico sets it while it upgrades or migrates its datastore. "+
		"capo writes no reservation until Calico unlocks it; capo-ipam journals teardowns and keeps their addresses allocated. "+
		"After a migration to %s, run capo in that group too, as Calico's components (%s=%s; the chart's calico.apiGroup)",
		e.Mode, apigroup.GroupV3, apigroup.EnvGroup, apigroup.GroupV3)
}

// IsLocked tells a LockedError from other failures.
func IsLocked(err error) bool { return errors.As(err, new(*LockedError)) }

// Lock follows Calico's datastore lock (ClusterInformation default's
// datastoreReady) in the mode in force: while Calico upgrades or migrates
// its datastore, capo writes nothing, as Calico's own CNI plugin refuses
// to work. On the Kubernetes datastore it is watched (a lock is seen at
// once, well inside the 10 s Calico drains before it copies); on etcdv3,
// and without a dynamic client, each check reads it. It fails closed:
// until its first answer, and while ClusterInformation default does not
// exist, it is as good as locked, and says why.
type Lock struct {
	mode     apigroup.Mode
	dyn      dynamic.Interface // nil: check reads
	get      func(ctx context.Context) (*bool, error)
	onChange func()

	mu         sync.Mutex
	known      bool
	absent     bool // no ClusterInformation default
	locked     bool
	unfollowed error // the watch's last failure, until it delivers again

	// While the watch cannot answer, a read of its own does (readThrough),
	// one at a time, its verdict kept for readFresh.
	readMu sync.Mutex
	readAt time.Time
	read   error
	now    func() time.Time
}

// readFresh is how long a read's verdict stands in for the watch's. Calico
// waits 10 s after locking before it copies anything, so a write let
// through on an unlocked read this old still lands before the copy, as one
// let through by the watch a moment before a lock does.
const readFresh = time.Second

// readTimeout bounds a read made while the watch cannot answer.
const readTimeout = 3 * time.Second

// NewLock follows the lock in m through dyn (watched), or get (read at
// each check); onChange, when set, runs after every change, so that a
// daemon can check at once rather than at its next probe.
func NewLock(m apigroup.Mode, dyn dynamic.Interface, get func(ctx context.Context) (*bool, error), onChange func()) *Lock {
	if m.Source == apigroup.SourceEtcd {
		dyn = nil
	}
	return &Lock{mode: m, dyn: dyn, get: get, onChange: onChange, now: time.Now}
}

// ClusterInfoReady reads ClusterInformation default's datastoreReady
// through Calico's client (either group, or etcdv3): nil when there is no
// ClusterInformation default, true when it does not say (as Calico's own
// migration reads it).
func ClusterInfoReady(c clientv3.Interface) func(ctx context.Context) (*bool, error) {
	return func(ctx context.Context) (*bool, error) {
		ci, err := c.ClusterInformation().Get(ctx, "default", options.GetOptions{})
		if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if ci.Spec.DatastoreReady == nil {
			ready := true
			return &ready, nil
		}
		return ci.Spec.DatastoreReady, nil
	}
}

// Run watches the lock until ctx ends, on the Kubernetes datastore.
func (l *Lock) Run(ctx context.Context) {
	if l.dyn != nil {
		l.watch(ctx, l.dyn)
	}
}

// Known reports whether the lock's state has been read: at once where it
// is read at each check (etcdv3), after its watch's first answer where it
// is watched.
func (l *Lock) Known() bool {
	if l == nil || l.dyn == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.known || l.unfollowed != nil
}

// check is a *LockedError while Calico's datastore is locked; when not
// watched, it reads ClusterInformation first.
func (l *Lock) check(ctx context.Context) error {
	if l.dyn == nil && l.get != nil {
		ready, err := l.get(ctx)
		if err != nil {
			return err
		}
		l.set(ready)
	}
	return l.err()
}

// err is a *LockedError while Calico's datastore is locked, or capo
// cannot tell, as last seen; while the watch cannot answer, as read now.
func (l *Lock) err() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	unfollowed, known, absent, locked := l.unfollowed, l.known, l.absent, l.locked
	l.mu.Unlock()
	if unfollowed != nil {
		return l.readThrough(unfollowed)
	}
	return l.verdict(known, absent, locked)
}

func (l *Lock) verdict(known, absent, locked bool) error {
	switch {
	case !known:
		return &LockedError{Mode: l.mode, NotYet: true}
	case absent:
		return &LockedError{Mode: l.mode, Absent: true}
	case locked:
		return &LockedError{Mode: l.mode}
	}
	return nil
}

// readThrough answers while the watch cannot: its connection cut, or a
// list failed and the reflector backs off before the next (up to 30 s).
// A failed read of the watch is no answer, but neither is it a reason to
// refuse what a read of ClusterInformation now can confirm: a hold or a
// teardown's reservation refused for it is an address left to Calico.
// When the read fails too, capo cannot tell, and writes nothing.
func (l *Lock) readThrough(watchErr error) error {
	if l.get == nil {
		return &LockedError{Mode: l.mode, Unfollowed: watchErr}
	}
	l.readMu.Lock()
	defer l.readMu.Unlock()
	if !l.readAt.IsZero() && l.now().Sub(l.readAt) < readFresh {
		return l.read
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	ready, err := l.get(ctx)
	if err != nil {
		l.read = &LockedError{Mode: l.mode, Unfollowed: fmt.Errorf("%w; reading it instead: %w", watchErr, err)}
	} else {
		l.read = l.verdict(true, ready == nil, ready != nil && !*ready)
	}
	l.readAt = l.now()
	return l.read
}

// unfollow records a failed watch; nil clears it.
func (l *Lock) unfollow(err error) {
	l.mu.Lock()
	changed := (l.unfollowed == nil) != (err == nil)
	l.unfollowed = err
	l.mu.Unlock()
	if changed && err != nil {
		slog.Error("cannot follow Calico's datastore lock: until it can, each write reads ClusterInformation first, and none is made while that read fails", "calico", l.mode.String(), "err", err)
	}
	if changed && l.onChange != nil {
		l.onChange()
	}
}

// set records ClusterInformation default's datastoreReady; nil is no
// ClusterInformation default at all, which says nothing of a lock: capo
// holds its writes back, as Calico's own CNI plugin refuses to work.
func (l *Lock) set(ready *bool) {
	l.unfollow(nil)
	absent, locked := ready == nil, ready != nil && !*ready
	l.mu.Lock()
	changed := !l.known || l.locked != locked || l.absent != absent
	l.known, l.locked, l.absent = true, locked, absent
	l.mu.Unlock()
	if !changed {
		return
	}
	switch {
	case absent:
		slog.Error("Calico's ClusterInformation default does not exist: no reservation is written until it does", "calico", l.mode.String())
	case locked:
		slog.Warn("Calico locked its datastore (ClusterInformation datastoreReady false): no reservation is written until it unlocks", "calico", l.mode.String())
	default:
		slog.Info("Calico's datastore is not locked (ClusterInformation datastoreReady)", "calico", l.mode.String())
	}
	if l.onChange != nil {
		l.onChange()
	}
}
