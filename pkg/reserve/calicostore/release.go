package calicostore

import (
	"context"
	"slices"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore/internal/layout"
)

// Release takes refs out of every object that holds them, as the last List
// saw them (a List first if there was none). An object left empty is
// retired in the same write and then deleted; an emptied overflow object
// also leaves its head's list, and a head left empty with nothing listed
// goes too.
func (s *Store) Release(ctx context.Context, refs []reserve.Ref) ([]reserve.Ref, error) {
	return s.release(ctx, refs, (*layout.Contents).Release)
}

// ReleaseByHand is Release that leaves, in each object, a mark of the
// teardowns it ended: Reserve refuses them (layout's released.go).
func (s *Store) ReleaseByHand(ctx context.Context, refs []reserve.Ref, at time.Time) ([]reserve.Ref, error) {
	return s.release(ctx, refs, func(c *layout.Contents, set reserve.RefSet) []reserve.Ref { return c.ReleaseByHand(set, at) })
}

// release takes refs out of the objects holding them with take.
func (s *Store) release(ctx context.Context, refs []reserve.Ref, take func(*layout.Contents, reserve.RefSet) []reserve.Ref) ([]reserve.Ref, error) {
	set, err := reserve.NewRefSet(refs)
	if err != nil {
		return nil, err
	}
	objs, err := s.holding(ctx, set)
	if err != nil {
		return nil, err
	}
	var released []reserve.Ref
	for _, res := range objs {
		var got []reserve.Ref
		l, err := s.edit(ctx, res.Name, res, func(c *layout.Contents) bool {
			got = take(c, set)
			return retireIfEmpty(c) || len(got) > 0
		})
		if err != nil {
			if mayHaveLanded(err) && len(got) > 0 {
				err = &reserve.MaybeWritten{Refs: got, Err: err}
			}
			return released, err
		}
		released = append(released, got...)
		if f := reserve.Written(ctx); f != nil && len(got) > 0 {
			f(got)
		}
		if err := s.finish(ctx, l); err != nil {
			return released, err
		}
	}
	slices.SortFunc(released, func(a, b reserve.Ref) int { return reserve.CompareAddr(a.IP, b.IP) })
	return released, nil
}

// Stamp sets Seen on the refs' entries that have none.
func (s *Store) Stamp(ctx context.Context, refs []reserve.Ref, seen time.Time) error {
	return s.editHolding(ctx, refs, func(c *layout.Contents, set reserve.RefSet) bool { return c.Stamp(set, seen) })
}

// Reown gives the StatefulSet entries refs name the owner UID uid.
func (s *Store) Reown(ctx context.Context, refs []reserve.Ref, uid string) error {
	return s.editHolding(ctx, refs, func(c *layout.Contents, set reserve.RefSet) bool { return c.Reown(set, uid) })
}

// editHolding applies change, a compare-and-swap per object, to every
// object holding any of refs; change says whether it changed the object.
func (s *Store) editHolding(ctx context.Context, refs []reserve.Ref, change func(*layout.Contents, reserve.RefSet) bool) error {
	set, err := reserve.NewRefSet(refs)
	if err != nil {
		return err
	}
	objs, err := s.holding(ctx, set)
	if err != nil {
		return err
	}
	for _, res := range objs {
		if _, err := s.edit(ctx, res.Name, res, func(c *layout.Contents) bool { return change(c, set) }); err != nil {
			return err
		}
	}
	return nil
}

// holding are the objects of the snapshot that hold any of refs: overflow
// and per-node objects first, heads last, so that a head sees the overflow
// objects this pass deletes off its list before it is judged empty.
func (s *Store) holding(ctx context.Context, set reserve.RefSet) ([]*apiv3.IPReservation, error) {
	snap, err := s.objects(ctx)
	if err != nil {
		return nil, err
	}
	var out []*apiv3.IPReservation
	for _, l := range snap {
		if l.c.Holds(set) {
			out = append(out, l.res)
		}
	}
	slices.SortFunc(out, func(a, b *apiv3.IPReservation) int { return headLast(a.Name) - headLast(b.Name) })
	return out, nil
}

func headLast(name string) int {
	if _, i, ok := ParseBucketName(name); ok && i == 0 {
		return 1
	}
	return 0
}

// retireIfEmpty marks an object that holds nothing and lists nothing as
// retired, and reports whether it did.
func retireIfEmpty(c *layout.Contents) bool {
	if !c.Retirable() {
		return false
	}
	c.Retired = true
	return true
}

// finish deletes an object retired by the write that produced l, then
// takes it off its head's list; a head left empty goes the same way.
func (s *Store) finish(ctx context.Context, l *loaded) error {
	if l == nil || !l.c.Retired {
		return nil
	}
	if gone, err := s.io.remove(ctx, l); err != nil || !gone || l.c.Legacy() || l.c.Index == 0 {
		return err
	}
	return s.unlist(ctx, l.c.Bucket, l.c.Index)
}

// unlist takes overflow object i off bucket n's list, then looks whether a
// writer has made it again meanwhile and lists it back if so. The writer
// does the converse (creates, then looks at the list), so whichever comes
// second sees the other: the object never stays unlisted.
func (s *Store) unlist(ctx context.Context, n, i int) error {
	head, err := s.edit(ctx, BucketName(n, 0), nil, func(c *layout.Contents) bool {
		unlisted := !c.Retired && c.Unlist(i)
		return retireIfEmpty(c) || unlisted
	})
	if err == nil {
		err = s.finish(ctx, head)
	}
	if err != nil {
		return err
	}
	if again, err := s.io.get(ctx, BucketName(n, i)); err != nil || again == nil {
		return err
	}
	return s.relist(ctx, n, []int{i})
}

// edit applies change to the object as it is now and writes it if change
// says it changed, reading afresh after a conflict. from is the object as
// last seen (nil: read it). It returns the object as written, or as read
// when unchanged; nil if it does not exist.
func (s *Store) edit(ctx context.Context, name string, from *apiv3.IPReservation, change func(*layout.Contents) bool) (*loaded, error) {
	for attempt := 0; ; attempt++ {
		var l *loaded
		var err error
		if from != nil && attempt == 0 {
			l = decode(from)
		} else if l, err = s.io.get(ctx, name); err != nil || l == nil {
			return nil, err
		}
		if !change(l.c) {
			return l, nil
		}
		out, err := s.io.put(ctx, l.c, l.res)
		if err == nil {
			return out, nil
		}
		if !retriable(err) || attempt >= maxAttempts {
			return nil, err
		}
		if err := s.io.backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
}
