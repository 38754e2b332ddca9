package calicogate

import (
	"context"
	"errors"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"

	"github.com/capo-net/capo/pkg/calicoapi"
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

// FollowLock follows Calico's datastore lock in the mode in force until
// ctx ends and returns the check a gate runs: on the Kubernetes datastore
// it watches ClusterInformation through dyn, calling onChange on every
// change; on etcdv3 (or with no dyn) each check reads it through c.
func FollowLock(ctx context.Context, dyn dynamic.Interface, c clientv3.Interface, onChange func()) func(context.Context) error {
	m, _ := calicoapi.InForce()
	l := calicoapi.NewLock(m, onChange)
	if m.Source != calicoapi.SourceEtcd && dyn != nil {
		go l.Watch(ctx, dyn)
		return func(context.Context) error { return l.Err() }
	}
	get := ClusterInfoReady(c)
	return func(ctx context.Context) error {
		ready, err := get(ctx)
		if err != nil {
			return err
		}
		l.Set(ready)
		return l.Err()
	}
}
