// Package calicogate holds capo-controller's reads and writes of Calico back
// while Calico's API group in force cannot be used (pkg/calicoapi decides
// and checks it); it links Calico IPAM's types, which capo-install must not.
package calicogate

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"k8s.io/client-go/discovery"

	"github.com/capo-net/capo/pkg/calicoapi"
	"github.com/capo-net/capo/pkg/reserve"
)

// Gate keeps the outcome of the last check of Calico's API group, and
// stops every read and write capo makes through it while that failed.
type Gate struct {
	check func(context.Context) error
	every time.Duration

	mu  sync.Mutex
	err error
}

// NewGate runs Check every period.
func NewGate(disc discovery.DiscoveryInterface, kinds []calicoapi.Kind, lock func(context.Context) error, every time.Duration) *Gate {
	return NewGateFunc(Check(disc, kinds, nil, lock), every)
}

// Check says whether capo may use Calico now: every type in kinds is
// served in the mode in force (disc), this build can work there, the
// node's calico_api_group (netconf, when set: calico-ipam reads it on
// every call, and an operator may switch it while capo runs) names that
// group, and Calico has not locked its datastore for an upgrade or
// migration (lock, when set).
func Check(disc discovery.DiscoveryInterface, kinds []calicoapi.Kind, netconf func() string, lock func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := calicoapi.Check(ctx, disc, kinds); err != nil {
			return err
		}
		m, _ := calicoapi.InForce()
		if err := calicoapi.Supported(m); err != nil {
			return err
		}
		if netconf != nil {
			if err := calicoapi.CheckNetconf(m, netconf()); err != nil {
				return err
			}
		}
		if lock != nil {
			return lock(ctx)
		}
		return nil
	}
}

// NewGateFunc is a gate on any check.
func NewGateFunc(check func(context.Context) error, every time.Duration) *Gate {
	return &Gate{check: check, every: every, err: calicoapi.ErrNotChecked}
}

// Run checks now and then every period until ctx ends.
func (g *Gate) Run(ctx context.Context) {
	for {
		g.Once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(g.every):
		}
	}
}

// Once checks now. A failed check of any kind closes the gate: a view
// that cannot be confirmed is not one to act on.
func (g *Gate) Once(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := g.check(cctx)
	cancel()
	if err != nil && ctx.Err() != nil {
		return // stopping: says nothing about Calico
	}
	g.mu.Lock()
	was := g.err
	g.err = err
	g.mu.Unlock()
	switch {
	case err != nil && (was == nil || was.Error() != err.Error()):
		slog.Error("Calico's API group cannot be used: not ready; nothing is read or written in Calico until it can", "err", err)
	case err == nil && was != nil && was != calicoapi.ErrNotChecked:
		slog.Info("Calico's API group serves every type capo uses again", "after", was.Error())
	}
}

// Err is nil while the last check passed.
func (g *Gate) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Ready is a readiness check: ok, or the reason naming the group.
func (g *Gate) Ready() (bool, string) {
	if err := g.Err(); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// Store is s behind the gate: every call fails with the gate's error
// while it is closed, so no caller reads an empty view as the truth.
func (g *Gate) Store(s reserve.Store) reserve.Store { return gatedStore{s, g} }

type gatedStore struct {
	reserve.Store
	g *Gate
}

func (s gatedStore) Reserve(ctx context.Context, node string, e []reserve.Entry) (*reserve.Result, error) {
	if err := s.g.Err(); err != nil {
		return nil, err
	}
	return s.Store.Reserve(ctx, node, e)
}

func (s gatedStore) Release(ctx context.Context, refs []reserve.Ref) ([]reserve.Ref, error) {
	if err := s.g.Err(); err != nil {
		return nil, err
	}
	return s.Store.Release(ctx, refs)
}

func (s gatedStore) ReleaseByHand(ctx context.Context, refs []reserve.Ref, at time.Time) ([]reserve.Ref, error) {
	if err := s.g.Err(); err != nil {
		return nil, err
	}
	return s.Store.ReleaseByHand(ctx, refs, at)
}

func (s gatedStore) List(ctx context.Context) (*reserve.Listing, error) {
	if err := s.g.Err(); err != nil {
		return nil, err
	}
	return s.Store.List(ctx)
}

func (s gatedStore) ListNode(ctx context.Context, node string) ([]reserve.Entry, error) {
	if err := s.g.Err(); err != nil {
		return nil, err
	}
	return s.Store.ListNode(ctx, node)
}

func (s gatedStore) Stamp(ctx context.Context, refs []reserve.Ref, seen time.Time) error {
	if err := s.g.Err(); err != nil {
		return err
	}
	return s.Store.Stamp(ctx, refs, seen)
}

func (s gatedStore) Reown(ctx context.Context, refs []reserve.Ref, uid string) error {
	if err := s.g.Err(); err != nil {
		return err
	}
	return s.Store.Reown(ctx, refs, uid)
}

func (s gatedStore) Tidy(ctx context.Context) (*reserve.Tidied, error) {
	if err := s.g.Err(); err != nil {
		return nil, err
	}
	return s.Store.Tidy(ctx)
}

// AssignmentReader is the part of libcalico-go's IPAM client capo asks
// who holds an address (calicoipam.Reader).
type AssignmentReader interface {
	GetAssignmentAttributes(ctx context.Context, addr cnet.IP) (map[string]string, *string, error)
}

// Reader is r behind the gate: while it is closed, "who holds this
// address" is an error, never "nobody".
func (g *Gate) Reader(r AssignmentReader) AssignmentReader { return gatedReader{r, g} }

type gatedReader struct {
	r AssignmentReader
	g *Gate
}

func (r gatedReader) GetAssignmentAttributes(ctx context.Context, addr cnet.IP) (map[string]string, *string, error) {
	if err := r.g.Err(); err != nil {
		return nil, nil, err
	}
	return r.r.GetAssignmentAttributes(ctx, addr)
}

// GetUtilization passes the capacity read through the gate when r has it.
func (r gatedReader) GetUtilization(ctx context.Context, args ipam.GetUtilizationArgs) ([]*ipam.PoolUtilization, error) {
	u, ok := r.r.(interface {
		GetUtilization(context.Context, ipam.GetUtilizationArgs) ([]*ipam.PoolUtilization, error)
	})
	if !ok {
		return nil, errors.New("this IPAM reader cannot read pool utilization")
	}
	if err := r.g.Err(); err != nil {
		return nil, err
	}
	return u.GetUtilization(ctx, args)
}

var _ reserve.Store = gatedStore{}

// ErrGate is for tests and callers that need to tell the gate's refusal
// from a datastore failure.
func ErrGate(err error) bool {
	return errors.Is(err, calicoapi.ErrNotChecked) || calicoapi.IsNotServed(err) || errors.As(err, new(*calicoapi.UnsupportedError))
}
