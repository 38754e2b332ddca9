package reserve

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/ctxutil"
)

// write stores every changed object: an update at the version it was read
// at, or a create for a new shard. written collects the addresses of the
// objects that made it, for a retry after a conflict on a later one.
func (s *CalicoStore) write(ctx context.Context, node string, objs []*object, written map[string]bool) error {
	for _, o := range objs {
		if !o.dirty() {
			continue
		}
		cidrs, ann := o.shard.encode()
		var err error
		if o.res == nil {
			res := apiv3.NewIPReservation()
			res.ObjectMeta = metav1.ObjectMeta{
				Name:        ShardName(node, o.index),
				Labels:      map[string]string{ManagedByLabel: ManagedBy, NodeLabel: labelValue(node)},
				Annotations: map[string]string{MetadataAnnotation: ann, NodeLabel: node},
			}
			res.Spec.ReservedCIDRs = cidrs
			_, err = s.c.Create(ctx, res, options.SetOptions{})
		} else {
			res := o.res.DeepCopy()
			if res.Annotations == nil {
				res.Annotations = map[string]string{}
			}
			res.Annotations[MetadataAnnotation] = ann
			res.Spec.ReservedCIDRs = cidrs
			_, err = s.c.Update(ctx, res, options.SetOptions{})
		}
		if err != nil {
			return fmt.Errorf("writing reservation %s: %w", ShardName(node, o.index), err)
		}
		for _, ip := range o.adds {
			written[ip] = true
		}
	}
	return nil
}

// labelValue fits a node name into a label value (63 characters).
func labelValue(node string) string {
	if len(node) <= 63 {
		return node
	}
	return ShardName(node, 0)[len("capo-"):][:63]
}

// retriable errors mean another writer got there first: read again.
func retriable(err error) bool {
	return errors.As(err, new(cerrors.ErrorResourceUpdateConflict)) ||
		errors.As(err, new(cerrors.ErrorResourceAlreadyExists)) ||
		errors.As(err, new(cerrors.ErrorResourceDoesNotExist))
}

// backoff waits a little, with jitter so racing writers spread out.
func backoff(ctx context.Context, attempt int) error {
	if !ctxutil.Sleep(ctx, time.Duration(5+rand.IntN(10*(attempt+1)))*time.Millisecond) {
		return ctx.Err()
	}
	return nil
}
