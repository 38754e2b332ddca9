package calicostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore/internal/layout"
)

// List returns every reservation in every capo object, whatever the
// layout, and the objects that do not decode (skipped, never written).
func (s *Store) List(ctx context.Context) (*reserve.Listing, error) {
	objs, snap, decoded, skipped, err := s.io.list(ctx, "")
	if err != nil {
		return nil, err
	}
	s.io.keep(snap, decoded)
	return withSkipped(layout.Collect(objs), skipped), nil
}

// ListCached is List as the API server's watch cache has it (resource
// version "0"): it does not wait for the cache to catch up with etcd, so
// it may miss the last moments' writes. It is for a read that fresh reads
// of what matters complete (a return: the node's own bucket is read
// fresh); it leaves the snapshot writes start from alone.
func (s *Store) ListCached(ctx context.Context) (*reserve.Listing, error) {
	objs, _, _, skipped, err := s.io.list(ctx, "0")
	if err != nil {
		return nil, err
	}
	return withSkipped(layout.Collect(objs), skipped), nil
}

func (s *objectIO) list(ctx context.Context, rv string) ([]*layout.Contents, map[string]*apiv3.IPReservation, map[string]*loaded, []reserve.Unreadable, error) {
	list, err := s.objs.List(ctx, options.ListOptions{ResourceVersion: rv})
	var skipped []reserve.Unreadable
	if partial := PartialList(nil); errors.As(err, &partial) {
		skipped, err = partial.Skipped(), nil
	}
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("listing reservation objects: %w", err)
	}
	snap := map[string]*apiv3.IPReservation{}
	decoded := map[string]*loaded{}
	var objs []*layout.Contents
	for i := range list.Items {
		res := &list.Items[i]
		if res.Labels[layout.ManagedByLabel] != layout.ManagedBy {
			continue
		}
		snap[res.Name], decoded[res.Name] = res, decode(res)
		objs = append(objs, decoded[res.Name].c)
	}
	return objs, snap, decoded, skipped, nil
}

// withSkipped adds to l the objects a List could not read that bear
// capo's names: they are unreadable as any capo object that does not
// decode, never written, their addresses left reserved.
func withSkipped(l *reserve.Listing, skipped []reserve.Unreadable) *reserve.Listing {
	for _, u := range skipped {
		if _, _, bucket := layout.ParseBucketName(u.Object); bucket || strings.HasPrefix(u.Object, "capo-") {
			l.Unreadable = append(l.Unreadable, u)
		}
	}
	slices.SortFunc(l.Unreadable, func(a, b reserve.Unreadable) int { return strings.Compare(a.Object, b.Object) })
	return l
}

// objects are the snapshot's objects, decoded, by name; a List first if
// this store has none. They are shared: read them, decode afresh to change.
func (s *Store) objects(ctx context.Context) ([]*loaded, error) {
	if !s.io.listed() {
		if _, err := s.List(ctx); err != nil {
			return nil, err
		}
	}
	return s.io.snapshotted(), nil
}

// maxLegacyShards is how many objects a node could have in the per-node
// layout.
const maxLegacyShards = 1000

// ListNode returns one node's reservations: its bucket's, and those still
// in its objects of the per-node layout (read up to the first missing one;
// the controller's tidy moves them all, from a full List, anyway).
func (s *Store) ListNode(ctx context.Context, node string) ([]reserve.Entry, error) {
	// The node's per-node objects of the older layout are read beside its
	// bucket, not after it: this read is on a returning pod's ADD.
	type legacyRead struct {
		objs []*layout.Contents
		err  error
	}
	legacy := make(chan legacyRead, 1)
	go func() {
		objs, err := s.io.legacyObjects(ctx, node)
		legacy <- legacyRead{objs, err}
	}()
	b, _, err := s.loadBucket(ctx, layout.BucketOf(node))
	l := <-legacy
	if err != nil {
		return nil, err
	}
	if l.err != nil {
		return nil, l.err
	}
	objs := []*layout.Contents{}
	if b.Head != nil {
		objs = append(objs, b.Head)
	}
	objs = append(objs, b.Overflow...)
	objs = append(objs, l.objs...)
	var out []reserve.Entry
	for _, e := range layout.Collect(objs).Entries {
		if e.Node == node {
			out = append(out, e)
		}
	}
	return out, nil
}

// legacyObjects are the node's per-node objects of the older layout,
// <node>-<shard>, up to the first that does not exist.
func (s *objectIO) legacyObjects(ctx context.Context, node string) ([]*layout.Contents, error) {
	var objs []*layout.Contents
	for i := 0; i < maxLegacyShards; i++ {
		l, err := s.get(ctx, LegacyName(node, i))
		if err != nil {
			return nil, err
		}
		if l == nil {
			break
		}
		objs = append(objs, l.c)
	}
	return objs, nil
}
