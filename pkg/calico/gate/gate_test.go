package gate

import (
	"context"
	"errors"
	"testing"
	"time"

	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
)

type nobody struct{}

func (nobody) GetAssignmentAttributes(context.Context, cnet.IP) (map[string]string, *string, error) {
	return nil, nil, nil
}

func TestGateClosedUntilAPassingCheck(t *testing.T) {
	var err error = &apigroup.NotServedError{Group: apigroup.GroupV3, Missing: []string{"ipamhandles"}}
	g := NewFunc(func(context.Context) error { return err }, time.Hour)
	s := g.Store(reservetest.NewStore(reserve.DefaultLimits))
	r := g.IPAM(nobody{})
	ctx := context.Background()

	if _, e := s.List(ctx); !errors.Is(e, ErrNotChecked) {
		t.Fatalf("before the first check: %v", e)
	}
	_ = g.Once(ctx)
	if _, e := s.List(ctx); !apigroup.IsNotServed(e) {
		t.Fatalf("not served: %v", e)
	}
	if _, _, e := r.GetAssignmentAttributes(ctx, cnet.IP{}); !apigroup.IsNotServed(e) {
		t.Fatalf("reader: %v", e)
	}
	if ok, why := g.Ready(); ok || why == "" {
		t.Fatal("ready while not served")
	}
	err = nil
	_ = g.Once(ctx)
	if _, e := s.List(ctx); e != nil {
		t.Fatalf("open: %v", e)
	}
	if _, _, e := r.GetAssignmentAttributes(ctx, cnet.IP{}); e != nil {
		t.Fatalf("reader open: %v", e)
	}
	// A discovery failure closes it again: an unconfirmed view is not acted on.
	err = errors.New("connection refused")
	_ = g.Once(ctx)
	if _, e := s.Reserve(ctx, "n1", []reserve.Entry{{IP: "10.0.0.1"}}); e == nil {
		t.Fatal("open after a failed check")
	}
}

// The gate fails closed: a check that cannot be made (discovery answering
// 500) closes it as a type not served does, and Calico's lock closes it at
// once, between checks, whatever the last check said.
func TestGateFailsClosed(t *testing.T) {
	ctx := context.Background()
	ready := true
	m := apigroup.Mode{Group: apigroup.GroupV1, Source: apigroup.SourceEnv}
	l := NewLock(m, nil, func(context.Context) (*bool, error) { return &ready, nil }, nil)
	var checkErr error
	g := NewFunc(func(ctx context.Context) error {
		if checkErr != nil {
			return checkErr
		}
		return l.check(ctx)
	}, time.Hour)
	g.lock = l
	if err := g.Once(ctx); err != nil || g.Err() != nil {
		t.Fatalf("open: %v %v", err, g.Err())
	}
	ready = false
	if err := l.check(ctx); !IsLocked(err) { // the lock seen between two checks
		t.Fatal(err)
	}
	if !IsLocked(g.Err()) {
		t.Fatalf("the lock did not close the gate at once: %v", g.Err())
	}
	checkErr = errors.New("the server is currently unable to handle the request (get servergroups)")
	_ = g.Once(ctx)
	if g.Err() == nil {
		t.Fatal("open after a check that could not be made")
	}
}

// A check that failed only because ClusterInformation default was gone (a
// datastore wiped and set up again, as Calico's own suite does between
// specs) keeps the gate closed no longer than the lock says so: once the
// lock sees it again, the gate opens without waiting for the next check.
func TestGateOpensWithTheLock(t *testing.T) {
	ctx := context.Background()
	var ready *bool
	m := apigroup.Mode{Group: apigroup.GroupV1, Source: apigroup.SourceEnv}
	l := NewLock(m, nil, func(context.Context) (*bool, error) { return ready, nil }, nil)
	g := NewFunc(l.check, time.Hour)
	g.lock = l
	if err := g.Once(ctx); !IsLocked(err) {
		t.Fatalf("no ClusterInformation: %v", err)
	}
	if err := g.Err(); !IsLocked(err) {
		t.Fatalf("closed while absent: %v", err)
	}
	yes := true
	l.set(&yes) // as the watch delivers it
	if err := g.Err(); err != nil {
		t.Fatalf("ClusterInformation back, the gate still closed by the last check: %v", err)
	}
	checkErr := errors.New("the server is currently unable to handle the request (get servergroups)")
	g.check = func(context.Context) error { return checkErr }
	_ = g.Once(ctx)
	if err := g.Err(); err == nil || IsLocked(err) {
		t.Fatalf("a discovery failure must keep the gate closed whatever the lock says: %v", err)
	}
}
