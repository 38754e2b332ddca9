package calicostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/reserve/calicostore/internal/layout"
)

// objectIO reads and writes capo's reservation objects one at a time,
// counting the writes and the conflicts retried, and keeps the snapshot of
// the last List current with its own writes: Release, Stamp and Tidy,
// which follow a List, write against it instead of reading everything
// again. A stale one only costs a conflict and a fresh read.
type objectIO struct {
	objs      Objects
	conflicts atomic.Int64
	writes    atomic.Int64

	mu       sync.Mutex
	snapshot map[string]*apiv3.IPReservation // nil until a List
	decoded  map[string]*loaded              // the snapshot's objects decoded, read-only
}

// keep makes what a List read the snapshot.
func (s *objectIO) keep(snap map[string]*apiv3.IPReservation, decoded map[string]*loaded) {
	s.mu.Lock()
	s.snapshot, s.decoded = snap, decoded
	s.mu.Unlock()
}

// listed says whether there is a snapshot.
func (s *objectIO) listed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshot != nil
}

// snapshotted are the snapshot's objects, decoded, by name. They are
// shared: read them, decode afresh to change.
func (s *objectIO) snapshotted() []*loaded {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*loaded, 0, len(s.snapshot))
	for name, res := range s.snapshot {
		if d := s.decoded[name]; d == nil || d.res != res { // written since the List
			s.decoded[name] = decode(res)
		}
		out = append(out, s.decoded[name])
	}
	slices.SortFunc(out, func(a, b *loaded) int { return strings.Compare(a.res.Name, b.res.Name) })
	return out
}

// get reads one object; nil if it does not exist.
func (s *objectIO) get(ctx context.Context, name string) (*loaded, error) {
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
func (s *objectIO) put(ctx context.Context, c *layout.Contents, prev *apiv3.IPReservation) (*loaded, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // not sent: no write in doubt
	}
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
		return nil, &writeError{name: o.Name, err: err}
	}
	s.writes.Add(1)
	s.remember(out)
	return decode(out), nil
}

// remove deletes a retired object, only the one that was retired: a
// re-created object of the same name has another UID (and version), and
// then gone is false.
func (s *objectIO) remove(ctx context.Context, l *loaded) (gone bool, err error) {
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

func (s *objectIO) remember(res *apiv3.IPReservation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snapshot != nil {
		s.snapshot[res.Name] = res
	}
}

func (s *objectIO) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.snapshot, name)
}

// backoff counts a conflict and waits a little, with jitter so racing
// writers spread out.
func (s *objectIO) backoff(ctx context.Context, attempt int) error {
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
