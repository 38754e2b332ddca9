// Package calicostore keeps capo's reservations in Calico IPReservation
// objects through libcalico-go, so both datastores (Kubernetes CRDs and
// etcdv3) work the same. How the reservations are laid out in the objects
// and encoded is internal/layout's, which only this package reaches: it
// reads and writes, and gives the rest of the module the objects' names
// and keys (names.go) and, on Calico's own type, their encoding for a
// probe or a test that writes objects (encode.go).
//
// Every write is a create or a compare-and-swap update. Deleting is where
// the datastores differ: libcalico-go's Kubernetes backend ignores the
// resource version on Delete (only a UID precondition holds), so an object
// is never deleted while it may hold something. It is first retired, by a
// compare-and-swap update that empties it and marks it: a writer holding an
// older read fails its update, a writer reading it afterwards writes
// elsewhere. Only then is it deleted, with its UID (and version) as
// precondition, so a re-created object of the same name survives.
package calicostore

import (
	"context"
	"errors"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore/internal/layout"
)

// Objects is the part of libcalico-go's IPReservation client the store
// uses: clientv3's in production, reservetest's in-memory fake in tests.
type Objects interface {
	Create(ctx context.Context, res *apiv3.IPReservation, opts options.SetOptions) (*apiv3.IPReservation, error)
	Update(ctx context.Context, res *apiv3.IPReservation, opts options.SetOptions) (*apiv3.IPReservation, error)
	Delete(ctx context.Context, name string, opts options.DeleteOptions) (*apiv3.IPReservation, error)
	Get(ctx context.Context, name string, opts options.GetOptions) (*apiv3.IPReservation, error)
	List(ctx context.Context, opts options.ListOptions) (*apiv3.IPReservationList, error)
}

// PartialList is what an Objects' List may answer beside the objects it
// read: those it could not (a projectcalico.org/v3 object whose
// projectcalico.org/metadata does not decode). The store skips them,
// reports capo's among its unreadable objects, and carries on.
type PartialList interface {
	error
	Skipped() []reserve.Unreadable
}

var (
	_ Objects       = clientv3.IPReservationInterface(nil)
	_ reserve.Store = (*Store)(nil)
)

// Store is the reservation store on Calico's datastore.
type Store struct {
	io     objectIO
	limits reserve.Limits
}

// New keeps reservations through c (from clientv3.New) within l.
func New(c clientv3.Interface, l reserve.Limits) *Store { return NewOn(c.IPReservations(), l) }

// NewOn keeps reservations in objs within l.
func NewOn(objs Objects, l reserve.Limits) *Store { return &Store{io: objectIO{objs: objs}, limits: l} }

// Conflicts counts the compare-and-swap conflicts this store retried:
// another writer changed an object between its read and its write.
func (s *Store) Conflicts() int64 { return s.io.conflicts.Load() }

// Writes counts the objects this store created or updated.
func (s *Store) Writes() int64 { return s.io.writes.Load() }

// loaded is an object as read, decoded.
type loaded struct {
	res *apiv3.IPReservation
	c   *layout.Contents
}

func decode(res *apiv3.IPReservation) *loaded {
	return &loaded{res: res, c: layout.Decode(layout.Object{Name: res.Name, Labels: res.Labels, Annotations: res.Annotations, CIDRs: res.Spec.ReservedCIDRs})}
}

// retriable errors mean another writer got there first: read again.
func retriable(err error) bool {
	return errors.As(err, new(cerrors.ErrorResourceUpdateConflict)) ||
		errors.As(err, new(cerrors.ErrorResourceAlreadyExists)) ||
		errors.As(err, new(cerrors.ErrorResourceDoesNotExist))
}

// maxAttempts bounds the retries of one write: with the backoff below,
// about five seconds of losing every race. The caller's deadline usually
// ends it first.
const maxAttempts = 100
