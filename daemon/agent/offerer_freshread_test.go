package agent

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
	"github.com/capo-net/capo/pkg/returns"
	"github.com/capo-net/capo/pkg/returns/calicoview"
	"github.com/capo-net/capo/pkg/selection"
)

// listWaiting is a store whose List returns only once viewing is closed
// (or after a second): a List that the view read waits for times out.
type listWaiting struct {
	reserve.Store
	viewing  chan struct{}
	overlaps atomic.Bool
}

func (s *listWaiting) List(ctx context.Context) (*reserve.Listing, error) {
	select {
	case <-s.viewing:
		s.overlaps.Store(true)
	case <-time.After(time.Second):
	}
	return s.Store.List(ctx)
}

// A returning pod's ADD reads the reservations and Calico's view of the
// addresses at the same time: it waits for the slower read, not the sum.
// Both are still read, and the offer still decided on the fresh ones.
func TestOfferReadsReservationsAndCalicoTogether(t *testing.T) {
	ctx := context.Background()
	store := &listWaiting{Store: reservetest.NewStore(reserve.DefaultLimits), viewing: make(chan struct{})}
	r, pod := returnsHolding(t, store)
	r.setMode(func() config.ReturnMode { return config.ReturnSameNode })
	r.o.timeout = 5 * time.Second
	entries, err := store.ListNode(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	r.o.held.replace(entries)
	var views atomic.Int32
	r.o.views = func(_ context.Context, es []reserve.Entry) (*calicoview.View, error) {
		if views.Add(1) == 1 {
			close(store.viewing)
		}
		return nil, errors.New("calico unreachable")
	}
	got := r.o.offer(ctx, pod, nil, selection.Decision{Verdict: selection.Selected}, "k8s-pod-network")
	if !store.overlaps.Load() {
		t.Error("the reservations were listed before Calico's view was read, not with it")
	}
	if views.Load() != 1 {
		t.Errorf("Calico's view read %d times, want once", views.Load())
	}
	if got == nil || got.Reason != string(returns.Unreadable) || len(got.Held) != 1 {
		t.Fatalf("offer = %+v, want a refusal of 10.0.0.3 on the unreadable view", got)
	}
}

// When the fresh reservations hold an address the index did not expect,
// the view is read again for it: no offer is judged on another address's
// view.
func TestOfferReadsTheViewAgainForAnUnexpectedAddress(t *testing.T) {
	ctx := context.Background()
	store := reservetest.NewStore(reserve.DefaultLimits)
	r, pod := returnsHolding(t, store)
	r.setMode(func() config.ReturnMode { return config.ReturnSameNode })
	r.o.timeout = 5 * time.Second
	r.o.held.replace([]reserve.Entry{{IP: "10.0.0.9", Namespace: "ns", Pod: "redis-3", PodUID: "pod-2"}})
	var read [][]string
	r.o.views = func(_ context.Context, es []reserve.Entry) (*calicoview.View, error) {
		read = append(read, returns.IPs(es))
		return nil, errors.New("calico unreachable")
	}
	r.o.offer(ctx, pod, nil, selection.Decision{Verdict: selection.Selected}, "k8s-pod-network")
	if len(read) != 2 || read[1][0] != "10.0.0.3" {
		t.Fatalf("views read for %v, want 10.0.0.9 (expected) then 10.0.0.3 (held)", read)
	}
}
