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
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	objs      Objects
	limits    reserve.Limits
	conflicts atomic.Int64
	writes    atomic.Int64

	// snapshot holds the objects the last List read, kept current with
	// this store's own writes: Release, Stamp and Tidy, which follow a
	// List, write against them instead of reading everything again. A
	// stale one only costs a conflict and a fresh read.
	mu       sync.Mutex
	snapshot map[string]*apiv3.IPReservation // nil until a List
	decoded  map[string]*loaded              // the snapshot's objects decoded, read-only
}

// New keeps reservations through c (from clientv3.New) within l.
func New(c clientv3.Interface, l reserve.Limits) *Store { return NewOn(c.IPReservations(), l) }

// NewOn keeps reservations in objs within l.
func NewOn(objs Objects, l reserve.Limits) *Store { return &Store{objs: objs, limits: l} }

// Conflicts counts the compare-and-swap conflicts this store retried:
// another writer changed an object between its read and its write.
func (s *Store) Conflicts() int64 { return s.conflicts.Load() }

// Writes counts the objects this store created or updated.
func (s *Store) Writes() int64 { return s.writes.Load() }

// loaded is an object as read, decoded.
type loaded struct {
	res *apiv3.IPReservation
	c   *layout.Contents
}

func decode(res *apiv3.IPReservation) *loaded {
	return &loaded{res: res, c: layout.Decode(layout.Object{Name: res.Name, Labels: res.Labels, Annotations: res.Annotations, CIDRs: res.Spec.ReservedCIDRs})}
}

// get reads one object; nil if it does not exist.
func (s *Store) get(ctx context.Context, name string) (*loaded, error) {
	res, err := s.objs.Get(ctx, name, options.GetOptions{})
	if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		s.forget(name)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading reservation object %s: %w", name, err)
	}
	s.remember(res)
	return decode(res), nil
}

// put writes c: a create when prev is nil, else an update at prev's version.
func (s *Store) put(ctx context.Context, c *layout.Contents, prev *apiv3.IPReservation) (*loaded, error) {
	o := c.Object()
	var res *apiv3.IPReservation
	if prev == nil {
		res = apiv3.NewIPReservation()
		res.ObjectMeta = metav1.ObjectMeta{Name: o.Name}
	} else {
		res = prev.DeepCopy()
	}
	res.Labels, res.Annotations, res.Spec.ReservedCIDRs = o.Labels, o.Annotations, o.CIDRs
	var out *apiv3.IPReservation
	var err error
	if prev == nil {
		out, err = s.objs.Create(ctx, res, options.SetOptions{})
	} else {
		out, err = s.objs.Update(ctx, res, options.SetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("writing reservation object %s: %w", o.Name, err)
	}
	s.writes.Add(1)
	s.remember(out)
	return decode(out), nil
}

// remove deletes a retired object, only the one that was retired: a
// re-created object of the same name has another UID (and version), and
// then gone is false.
func (s *Store) remove(ctx context.Context, l *loaded) (gone bool, err error) {
	uid := l.res.UID
	_, err = s.objs.Delete(ctx, l.res.Name, options.DeleteOptions{ResourceVersion: l.res.ResourceVersion, UID: &uid})
	switch {
	case err == nil, errors.As(err, new(cerrors.ErrorResourceDoesNotExist)):
		s.forget(l.res.Name)
		return true, nil
	case retriable(err):
		return false, nil // deleted and re-created meanwhile: not ours to delete
	}
	return false, fmt.Errorf("deleting retired reservation object %s: %w", l.res.Name, err)
}

func (s *Store) remember(res *apiv3.IPReservation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snapshot != nil {
		s.snapshot[res.Name] = res
	}
}

func (s *Store) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.snapshot, name)
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

// backoff counts a conflict and waits a little, with jitter so racing
// writers spread out.
func (s *Store) backoff(ctx context.Context, attempt int) error {
	s.conflicts.Add(1)
	t := time.NewTimer(time.Duration(5+rand.IntN(10*min(attempt+1, 10))) * time.Millisecond) //nolint:gosec // G404: jitter, not a secret
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
