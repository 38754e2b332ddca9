package agent

import (
	"context"

	"k8s.io/client-go/dynamic"

	"github.com/capo-net/capo/pkg/calicoapi"
)

// calicoLock follows Calico's datastore lock (ClusterInformation default's
// datastoreReady): while Calico upgrades or migrates its datastore the
// agent writes nothing, as Calico's own CNI plugin refuses to work. On the
// Kubernetes datastore it is watched (a lock is seen at once, well inside
// the 10 s Calico drains before it copies); on etcdv3, and without a
// dynamic client, each readiness probe reads it.
type calicoLock struct {
	lock *calicoapi.Lock
	dyn  dynamic.Interface // nil: poll
	get  func(ctx context.Context) (*bool, error)
}

// newCalicoLock wakes r's prober on every change, so that the agent turns
// not ready (and refuses to write) within the prober's short retry.
func newCalicoLock(r *readiness, dyn dynamic.Interface, get func(ctx context.Context) (*bool, error)) *calicoLock {
	m, _ := calicoapi.InForce()
	if m.Source == calicoapi.SourceEtcd {
		dyn = nil
	}
	return &calicoLock{lock: calicoapi.NewLock(m, r.poke), dyn: dyn, get: get}
}

// run watches the lock until ctx ends (the Kubernetes datastore).
func (l *calicoLock) run(ctx context.Context) {
	if l.dyn != nil {
		l.lock.Watch(ctx, l.dyn)
	}
}

// check is the lock's part of the API check: polled when not watched.
func (l *calicoLock) check(ctx context.Context) error {
	if l.dyn == nil && l.get != nil {
		ready, err := l.get(ctx)
		if err != nil {
			return err
		}
		l.lock.Set(ready)
	}
	return l.lock.Err()
}

// poke has the prober check again after its short retry.
func (r *readiness) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
