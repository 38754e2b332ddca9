// Package gate holds every read and write capo makes of Calico back while
// capo cannot use Calico in the API group in force (apigroup.Usable) or
// Calico has locked its datastore (Lock). Both daemons read and write
// through one: a closed gate is an error, never an empty answer, so the
// agent journals instead of reserving and the controller keeps its queue.
package gate

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/discovery"

	"github.com/capo-net/capo/pkg/calico/apigroup"
)

// ErrNotChecked holds everything back until a gate's first check: a read
// in a group Calico does not use sees nothing, and a write is lost.
var ErrNotChecked = errors.New("the Calico API group in force has not been checked yet")

var errNotDecided = errors.New("calico API group not decided yet (DecideOnce was not called)")

// Gate keeps the outcome of the last check of Calico, and stops every read
// and write capo makes through it while that failed.
type Gate struct {
	check func(context.Context) error
	lock  *Lock // nil: none followed
	every time.Duration

	mu  sync.Mutex
	err error
}

// New checks apigroup.Usable on the mode in force against disc and the
// node's calico_api_group (netconf; nil off a node), then lock (nil:
// none), now and then every period.
func New(disc discovery.DiscoveryInterface, netconf func() string, lock *Lock, every time.Duration) *Gate {
	g := NewFunc(func(ctx context.Context) error {
		m, ok := apigroup.InForce()
		if !ok {
			return errNotDecided
		}
		nc := ""
		if netconf != nil {
			nc = netconf()
		}
		if err := apigroup.Usable(disc.ServerResourcesForGroupVersion, m, nc); err != nil {
			return err
		}
		if lock != nil {
			return lock.check(ctx)
		}
		return nil
	}, every)
	g.lock = lock
	return g
}

// NewFunc is a gate on any check, closed until its first.
func NewFunc(check func(context.Context) error, every time.Duration) *Gate {
	return &Gate{check: check, every: every, err: ErrNotChecked}
}

// Run checks now and then every period until ctx ends.
func (g *Gate) Run(ctx context.Context) {
	for {
		_ = g.Once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(g.every):
		}
	}
}

// Once checks now and says how it went. Any failed check closes the gate,
// a passing discovery's as much as a type not served: a view that cannot
// be confirmed is not one to act on, and a failed discovery must not keep
// an earlier verdict standing past Calico's lock.
func (g *Gate) Once(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := g.check(cctx)
	cancel()
	if err != nil && ctx.Err() != nil {
		return err // stopping: says nothing of Calico
	}
	g.mu.Lock()
	was := g.err
	g.err = err
	g.mu.Unlock()
	switch {
	case err != nil && (was == nil || was.Error() != err.Error()):
		slog.Error("Calico cannot be used in the API group in force: nothing is read or written in Calico until it can", "err", err)
	case err == nil && was != nil && !errors.Is(was, ErrNotChecked):
		slog.Info("Calico can be used again: every type capo uses is served and the datastore is not locked", "after", was.Error())
	}
	return err
}

// Err is nil while the last check passed and Calico's datastore is not
// locked now: the lock is read as its watch last saw it, not as the last
// check did, both ways. A lock closes the gate at once, and an unlock, or
// ClusterInformation created again, opens it at once: a check that failed
// only for the lock says nothing the lock does not say better now, and a
// teardown refused on it is journaled, its address kept from Calico's own
// release until the agent replays it.
func (g *Gate) Err() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	err := g.err
	g.mu.Unlock()
	if err != nil && (g.lock == nil || !IsLocked(err)) {
		return err
	}
	return g.lock.err()
}

// Ready is a readiness check: ok, or the reason naming the group.
func (g *Gate) Ready() (bool, string) {
	if err := g.Err(); err != nil {
		return false, err.Error()
	}
	return true, ""
}
