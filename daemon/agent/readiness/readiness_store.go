package readiness

import (
	"context"

	"github.com/capo-net/capo/pkg/reserve"
)

// watchedStore tells readiness how every reservation write went. Only a
// write that changed something proves the agent can write: a reservation
// found already held (the controller covered it) wrote nothing.
type watchedStore struct {
	reserve.Store
	r *Readiness
}

var _ reserve.Store = watchedStore{}

// Watch is s with every reservation write reported to r.
func (r *Readiness) Watch(s reserve.Store) reserve.Store { return watchedStore{Store: s, r: r} }

func (s watchedStore) Reserve(ctx context.Context, node string, entries []reserve.Entry) (*reserve.Result, error) {
	res, err := s.Store.Reserve(ctx, node, entries)
	switch {
	case err != nil:
		s.r.failed(err)
	case len(res.Added) > 0:
		s.r.landed()
	}
	return res, err
}

func (s watchedStore) Release(ctx context.Context, refs []reserve.Ref) ([]reserve.Ref, error) {
	out, err := s.Store.Release(ctx, refs)
	switch {
	case err != nil:
		s.r.failed(err)
	case len(out) > 0:
		s.r.landed()
	}
	return out, err
}
