package controller

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/gate"
)

// While Calico's types are not served in the group in force, the
// controller's view of Calico is empty: it must be not ready, and an
// agent-away entry that view shows as free must wait, not be dropped.
func TestAgentAwayEntryWaitsWhileCalicoTypesAreNotServed(t *testing.T) {
	var served atomic.Bool
	notServed := &apigroup.NotServedError{Group: apigroup.GroupV1, Missing: []string{"ipreservations", "ipamblocks"}}
	g := gate.NewFunc(func(context.Context) error {
		if served.Load() {
			return nil
		}
		return notServed
	}, time.Hour)
	b := newAwayBed(t, func(o *Options) { o.CalicoAPI = g })
	b.c.synced.Store(true)
	_ = g.Once(context.Background())
	if ok, why := b.c.ready(); ok || !strings.Contains(why, "not served in API group crd.projectcalico.org/v1") {
		t.Fatalf("ready %v %q", ok, why)
	}
	b.ipam.mu.Lock()
	delete(b.ipam.by, "10.0.0.5") // what a list of a type not served reads as: nobody holds it
	b.ipam.mu.Unlock()
	b.agentReady(false)
	b.evict()
	if e, ok := b.held("10.0.0.5"); ok {
		t.Fatalf("reserved through a closed gate: %+v", e)
	}
	if n := b.c.coverer.lost.depth(); n == 0 {
		t.Fatal("the agent-away entry was dropped on an empty view of Calico")
	}

	// The CRDs are installed: the real view shows the pod's allocation.
	b.ipam.set("10.0.0.5", "kafka", "broker-0")
	served.Store(true)
	_ = g.Once(context.Background())
	if ok, why := b.c.ready(); !ok {
		t.Fatalf("not ready once served: %s", why)
	}
	b.c.coverer.lost.kick()
	waitFor(t, "the waiting entry reserved", func() bool { _, ok := heldIn(b.store, "10.0.0.5"); return ok })
}
