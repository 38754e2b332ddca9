package reserve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
)

// Store holds reservations. Reserve and Release are idempotent: reserving a
// held address is success and keeps its first timestamp; releasing a free
// one is a no-op.
type Store interface {
	Reserve(ctx context.Context, node string, entries []Entry) (*Result, error)
	Release(ctx context.Context, node string, ips []string) ([]string, error)
	List(ctx context.Context) ([]Entry, error)
	ListNode(ctx context.Context, node string) ([]Entry, error)
}

// Result says which addresses a Reserve added and which were already held.
type Result struct {
	Added, AlreadyHeld []string
}

var _ Store = (*CalicoStore)(nil)

// CalicoStore keeps reservations in IPReservation objects through
// libcalico-go. Every write is a create or a compare-and-swap update.
type CalicoStore struct {
	c      clientv3.IPReservationInterface
	limits Limits

	// listed holds the objects the last List read, by name: a release pass
	// that follows a List writes against them (compare-and-swap on their
	// version) instead of reading each node's objects again. A stale one
	// only costs a conflict and a fresh read.
	mu     sync.Mutex
	listed map[string]*apiv3.IPReservation
}

// NewCalicoStore uses c (from clientv3.New) with the given limits.
func NewCalicoStore(c clientv3.Interface, l Limits) *CalicoStore {
	return &CalicoStore{c: c.IPReservations(), limits: l}
}

const (
	maxAttempts = 20
	maxShards   = 1000
)

// object is one loaded shard with the version it was read at.
type object struct {
	index int                  // shard number; names the object
	res   *apiv3.IPReservation // nil: does not exist yet
	shard *shard
	adds  []string // addresses this write adds
	drops []string // addresses this write removes
}

func (o *object) dirty() bool { return len(o.adds) > 0 || len(o.drops) > 0 }

// listedNode builds a node's shards from the last List, taking them out of
// it; nil when that List did not hold the node's first shard.
func (s *CalicoStore) listedNode(node string) []*object {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*object
	for i := 0; i < maxShards; i++ {
		res, ok := s.listed[ShardName(node, i)]
		if !ok {
			break
		}
		delete(s.listed, res.Name)
		sh, err := decodeShard(node, res.Spec.ReservedCIDRs, res.Annotations[MetadataAnnotation])
		if err != nil {
			return nil
		}
		out = append(out, &object{index: i, res: res, shard: sh})
	}
	return out
}

// loadNode reads a node's shards in order. Shards are only ever removed
// from the end, so the first missing one ends the list.
func (s *CalicoStore) loadNode(ctx context.Context, node string) ([]*object, error) {
	var out []*object
	for i := 0; i < maxShards; i++ {
		res, err := s.c.Get(ctx, ShardName(node, i), options.GetOptions{})
		if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading reservation %s: %w", ShardName(node, i), err)
		}
		sh, err := decodeShard(node, res.Spec.ReservedCIDRs, res.Annotations[MetadataAnnotation])
		if err != nil {
			return nil, fmt.Errorf("reservation %s: %w", res.Name, err)
		}
		out = append(out, &object{index: i, res: res, shard: sh})
	}
	return nil, fmt.Errorf("node %s has more than %d reservation objects", node, maxShards)
}

// Reserve adds entries to the node's objects, creating one when all are full.
func (s *CalicoStore) Reserve(ctx context.Context, node string, entries []Entry) (*Result, error) {
	written := map[string]bool{} // added by an earlier attempt whose other writes conflicted
	for attempt := 0; ; attempt++ {
		objs, err := s.loadNode(ctx, node)
		if err != nil {
			return nil, err
		}
		objs, held := place(node, objs, entries, s.limits)
		err = s.write(ctx, node, objs, written)
		if err == nil {
			res := &Result{}
			for _, ip := range held {
				if written[ip] {
					res.Added = append(res.Added, ip)
				} else {
					res.AlreadyHeld = append(res.AlreadyHeld, ip)
				}
			}
			for _, o := range objs {
				res.Added = append(res.Added, o.adds...)
			}
			return res, nil
		}
		if !retriable(err) || attempt >= maxAttempts {
			return nil, err
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
}

// place puts each entry not yet held into the first shard with room,
// appending shards as needed. It returns the objects, each with the
// addresses it gains, and the entries' addresses already held.
func place(node string, objs []*object, entries []Entry, l Limits) ([]*object, []string) {
	holder := map[string]bool{}
	for _, o := range objs {
		for ip := range o.shard.entries {
			holder[ip] = true
		}
	}
	sizes := make([]int, len(objs))
	for i, o := range objs {
		sizes[i] = o.shard.size()
	}
	var held []string
	for _, e := range entries {
		if holder[e.IP] {
			if !slices.Contains(held, e.IP) {
				held = append(held, e.IP)
			}
			continue
		}
		e.Node = node
		i := 0
		for i < len(objs) && !objs[i].shard.fits(e, l, sizes[i]) {
			i++
		}
		if i == len(objs) {
			objs = append(objs, &object{index: len(objs), shard: &shard{entries: map[string]Entry{}}})
			sizes = append(sizes, len(formatV1))
		}
		objs[i].shard.entries[e.IP] = e
		objs[i].adds = append(objs[i].adds, e.IP)
		sizes[i] += len(entrySep) + len(e.encode())
		holder[e.IP] = true
	}
	return objs, held
}
