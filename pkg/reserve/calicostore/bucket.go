package calicostore

import (
	"context"
	"slices"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore/internal/layout"
)

// loadBucket reads a bucket: its head, and the overflow objects the head
// lists that exist. A listed one that is missing is skipped, not the end:
// the list runs ahead of a creation and behind a deletion. A retired head
// is deleted on the way: it holds nothing and nobody may write to it.
func (s *Store) loadBucket(ctx context.Context, n int) (*layout.Bucket, map[*layout.Contents]*apiv3.IPReservation, error) {
	b := &layout.Bucket{N: n}
	read := map[*layout.Contents]*apiv3.IPReservation{}
	head, err := s.io.get(ctx, BucketName(n, 0))
	if err != nil {
		return nil, nil, err
	}
	if head != nil && head.c.Retired {
		if _, err := s.io.remove(ctx, head); err != nil {
			return nil, nil, err
		}
		head = nil
	}
	if head == nil {
		return b, read, nil
	}
	b.Head, read[head.c] = head.c, head.res
	for _, i := range head.c.Overflow {
		o, err := s.io.get(ctx, BucketName(n, i))
		if err != nil {
			return nil, nil, err
		}
		if o != nil {
			b.Overflow, read[o.c] = append(b.Overflow, o.c), o.res
		}
	}
	return b, read, nil
}

// Reserve adds entries to the node's bucket: one write when they fit in
// an object, more when objects must be added.
func (s *Store) Reserve(ctx context.Context, node string, entries []reserve.Entry) (*reserve.Result, error) {
	return s.place(ctx, layout.BucketOf(node), []batch{{node, entries}}, false)
}

// batch is one node's entries.
type batch struct {
	node    string
	entries []reserve.Entry
}

// place writes batches of nodes of bucket n into it, reading it afresh
// after a conflict. With refresh (the migration), held entries take the
// older record of the two.
func (s *Store) place(ctx context.Context, n int, batches []batch, refresh bool) (*reserve.Result, error) {
	written := map[string]bool{} // added by an attempt whose later writes conflicted
	for attempt := 0; ; attempt++ {
		b, read, err := s.loadBucket(ctx, n)
		if err != nil {
			return nil, err
		}
		b.Expire(time.Now())
		p := &layout.Placement{}
		for _, bt := range batches {
			one, err := b.Place(bt.node, bt.entries, s.limits, refresh)
			if err != nil {
				return nil, err
			}
			p = p.Then(one)
		}
		err = s.apply(ctx, n, p, read, written)
		if err == nil {
			res := &reserve.Result{Added: p.Added, Refused: p.Refused}
			for _, ip := range p.Held {
				if written[ip] && !slices.Contains(res.Added, ip) {
					res.Added = append(res.Added, ip)
				} else {
					res.AlreadyHeld = append(res.AlreadyHeld, ip)
				}
			}
			return res, nil
		}
		if !retriable(err) || attempt >= maxAttempts {
			return nil, err
		}
		if err := s.io.backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
}

// apply makes a placement's writes in order, the head first, and then
// checks that every overflow object it created is still listed in the
// head: a tidy that ran between the two may have found it missing.
func (s *Store) apply(ctx context.Context, n int, p *layout.Placement, read map[*layout.Contents]*apiv3.IPReservation, written map[string]bool) error {
	var created []int
	for _, w := range p.Writes {
		if _, err := s.io.put(ctx, w.Contents, read[w.Contents]); err != nil {
			return err
		}
		for _, ip := range w.Adds {
			written[ip] = true
		}
		if w.Create && w.Index > 0 {
			created = append(created, w.Index)
		}
	}
	if len(created) == 0 {
		return nil
	}
	return s.relist(ctx, n, created)
}

// relist makes sure bucket n's head lists the overflow objects idx,
// creating the head if it is gone.
func (s *Store) relist(ctx context.Context, n int, idx []int) error {
	add := func(c *layout.Contents) bool {
		changed := false
		for _, i := range idx {
			changed = c.Relist(i) || changed
		}
		return changed
	}
	for attempt := 0; ; attempt++ {
		head, err := s.edit(ctx, BucketName(n, 0), nil, func(c *layout.Contents) bool { return !c.Retired && add(c) })
		if err != nil || head != nil && !head.c.Retired {
			return err
		}
		if head != nil {
			if _, err := s.io.remove(ctx, head); err != nil {
				return err
			}
		}
		c := layout.NewBucketObject(n, 0)
		add(c)
		if _, err = s.io.put(ctx, c, nil); err == nil || !retriable(err) || attempt >= maxAttempts {
			return err
		}
		if err := s.io.backoff(ctx, attempt); err != nil {
			return err
		}
	}
}
