package reservetest

import (
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
)

var _ reserve.Store = (*Store)(nil)

// Store is the reservation store on an in-memory datastore: capo's own
// store logic, so its users' tests see what they would see in a cluster
// (the layout, first timestamps, unreadable objects, conflicts), in
// microseconds. Objects lets a test seed, corrupt or interleave.
type Store struct {
	*calicostore.Store
	Objects *Objects
}

// NewStore is an empty store with the given limits (reserve.DefaultLimits
// unless a test needs objects to fill up).
func NewStore(l reserve.Limits) *Store {
	objs := NewObjects()
	return &Store{Store: calicostore.NewOn(objs, l), Objects: objs}
}

// Clone is another store on the same datastore, as another process (an
// agent beside the controller) would have.
func (s *Store) Clone(l reserve.Limits) *Store {
	return &Store{Store: calicostore.NewOn(s.Objects, l), Objects: s.Objects}
}
