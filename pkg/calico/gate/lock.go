package gate

import (
	"context"
	"errors"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"

	"github.com/capo-net/capo/pkg/calico/apigroup"
)

// ClusterInfoReady reads ClusterInformation default's datastoreReady
// through Calico's client (either group, or etcdv3); none is no lock.
func ClusterInfoReady(c clientv3.Interface) func(ctx context.Context) (*bool, error) {
	return func(ctx context.Context) (*bool, error) {
		ci, err := c.ClusterInformation().Get(ctx, "default", options.GetOptions{})
		if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return ci.Spec.DatastoreReady, nil
	}
}

// Follower follows Calico's datastore lock (ClusterInformation default's
// datastoreReady) in the mode in force: while Calico upgrades or migrates
// its datastore, capo writes nothing, as Calico's own CNI plugin refuses
// to work. On the Kubernetes datastore it is watched (a lock is seen at
// once, well inside the 10 s Calico drains before it copies); on etcdv3,
// and without a dynamic client, each Check reads it.
type Follower struct {
	lock *apigroup.Lock
	dyn  dynamic.Interface // nil: Check reads
	get  func(ctx context.Context) (*bool, error)
}

// NewFollower follows the lock through dyn, or get; onChange runs on
// every change, so that a daemon can check at once.
func NewFollower(dyn dynamic.Interface, get func(ctx context.Context) (*bool, error), onChange func()) *Follower {
	m, _ := apigroup.InForce()
	if m.Source == apigroup.SourceEtcd {
		dyn = nil
	}
	return &Follower{lock: apigroup.NewLock(m, onChange), dyn: dyn, get: get}
}

// Run watches the lock until ctx ends, on the Kubernetes datastore.
func (f *Follower) Run(ctx context.Context) {
	if f.dyn != nil {
		f.lock.Watch(ctx, f.dyn)
	}
}

// Check is a *apigroup.LockedError while Calico's datastore is locked;
// when not watched, it reads ClusterInformation first.
func (f *Follower) Check(ctx context.Context) error {
	if f.dyn == nil && f.get != nil {
		ready, err := f.get(ctx)
		if err != nil {
			return err
		}
		f.lock.Set(ready)
	}
	return f.lock.Err()
}
