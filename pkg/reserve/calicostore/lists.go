package calicostore

import (
	"context"
	"errors"
	"slices"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore/internal/layout"
)

// repairLists makes each head's overflow list match the overflow objects
// that exist: a writer that stopped between listing and creating, or
// between deleting and unlisting, leaves them apart. Readers of a bucket
// only miss entries meanwhile; Calico enforces every object regardless.
func (s *Store) repairLists(ctx context.Context, snap []*loaded, t *reserve.Tidied) error {
	heads := map[int]*loaded{}
	exist := map[int][]int{}
	for _, l := range snap {
		switch {
		case l.c.Legacy() || l.c.Retired:
		case l.c.Index == 0:
			heads[l.c.Bucket] = l
		default:
			exist[l.c.Bucket] = append(exist[l.c.Bucket], l.c.Index)
		}
	}
	var errs []error
	for n := range layout.Buckets {
		var listed []int
		if h := heads[n]; h != nil {
			listed = h.c.Overflow
		}
		var unlisted []int
		for _, i := range exist[n] {
			if !slices.Contains(listed, i) {
				unlisted = append(unlisted, i)
			}
		}
		if len(unlisted) > 0 {
			errs = append(errs, s.relist(ctx, n, unlisted))
			t.Relisted += len(unlisted)
		}
		for _, i := range listed {
			if !slices.Contains(exist[n], i) {
				errs = append(errs, s.unlistIfGone(ctx, n, i))
			}
		}
	}
	return errors.Join(errs...)
}

// unlistIfGone takes overflow object i off bucket n's list if it does not
// exist now: the snapshot may predate its creation.
func (s *Store) unlistIfGone(ctx context.Context, n, i int) error {
	if l, err := s.io.get(ctx, BucketName(n, i)); err != nil || l != nil {
		return err
	}
	return s.unlist(ctx, n, i)
}
