package calicostore

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore/internal/layout"
)

// maxMigrated bounds the per-node objects one Tidy moves, so that a
// leader's pass stays short while a large cluster migrates: each costs a
// retiring write and a delete (the bucket writes are shared).
const maxMigrated = 100

// Tidy works from what the last List saw (a List first if none). It moves
// the entries of the per-node layout into their nodes' buckets and retires
// and deletes the emptied objects; drops the releases by hand past
// reserve.ReleasedByHandKept; deletes objects a writer left retired or
// empty; and puts overflow objects back on their head's list, or takes
// off the list what is gone.
func (s *Store) Tidy(ctx context.Context) (*reserve.Tidied, error) {
	snap, err := s.objects(ctx)
	if err != nil {
		return nil, err
	}
	t, now := &reserve.Tidied{}, time.Now()
	legacy := map[int][]*loaded{}
	migrating := 0
	var errs []error
	for _, l := range snap {
		switch {
		case l.c.Err != nil:
		case l.c.Retired:
			errs = append(errs, count(&t.Deleted, s.finish(ctx, l)))
		case l.c.Legacy():
			if migrating < maxMigrated {
				n := layout.BucketOf(l.c.Node)
				legacy[n] = append(legacy[n], l)
				migrating++
			}
		case l.c.Retirable(), l.c.Expirable(now):
			done, err := s.edit(ctx, l.res.Name, l.res, func(c *layout.Contents) bool {
				expired := c.Expire(now)
				return retireIfEmpty(c) || expired
			})
			if err == nil && done != nil && done.c.Retired {
				err = count(&t.Deleted, s.finish(ctx, done))
			}
			errs = append(errs, err)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(legacy)) {
		moved, deleted, err := s.migrate(ctx, n, legacy[n])
		t.Migrated, t.Deleted = t.Migrated+moved, t.Deleted+deleted
		errs = append(errs, err)
	}
	// The lists are judged on the snapshot as this tidy left it.
	if snap, err = s.objects(ctx); err != nil {
		return t, errors.Join(append(errs, err)...)
	}
	errs = append(errs, s.repairLists(ctx, snap, t))
	return t, errors.Join(errs...)
}

func count(n *int, err error) error {
	if err == nil {
		*n++
	}
	return err
}

// migrate moves per-node objects' entries into bucket n, keeping their
// metadata and first timestamps, then retires each object at the version
// it was read at. An agent of the per-node layout that wrote to one since
// makes that retiring fail: it is read again and moved again. Nothing is
// ever only in an object being deleted.
func (s *Store) migrate(ctx context.Context, n int, objs []*loaded) (moved, deleted int, err error) {
	for len(objs) > 0 {
		var batches []batch
		for _, l := range objs {
			batches = append(batches, batch{node: l.c.Node, entries: slices.Collect(maps.Values(l.c.Entries))})
		}
		if _, err := s.place(ctx, n, batches, true); err != nil {
			return moved, deleted, err
		}
		var again []*loaded
		for _, l := range objs {
			l = decode(l.res) // the snapshot's are shared
			l.c.Retired = true
			out, err := s.io.put(ctx, l.c, l.res)
			switch {
			case err == nil:
				moved += len(l.c.Entries)
				_, err = s.io.remove(ctx, out)
				deleted++
			case retriable(err):
				if l, err = s.io.get(ctx, l.res.Name); l != nil && l.c.Writable() {
					again = append(again, l)
				}
			}
			if err != nil {
				return moved, deleted, err
			}
		}
		objs = again
	}
	return moved, deleted, nil
}
