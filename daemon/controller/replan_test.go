package controller

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
)

// The pass plans 10.0.0.1's release (its TTL is over); before it writes,
// the pod is torn down again from another sandbox and its agent renews the
// reservation. The pass's write conflicts and is made again on a fresh
// read: the renewed reservation must survive, counted as no release, and
// be judged by its own age from the next pass on.
func TestPassKeepsAnEntryReplacedBeforeItsWrite(t *testing.T) {
	b := newPassBed(t)
	planned := held("10.0.0.1", "kafka", "broker-0", 2*time.Hour)
	planned.Sandbox = "aaaa"
	b.reserve("n1", planned, held("10.0.0.2", "kafka", "broker-1", time.Minute))
	renewed := planned
	renewed.Sandbox, renewed.ReservedAt, renewed.Seen = "bbbb", now, time.Time{}
	agent := b.store.Clone(reserve.DefaultLimits)
	head := calicostore.BucketName(calicostore.BucketOf("n1"), 0)
	done := false
	b.store.Objects.Before = func(verb, name string) error {
		if verb == "update" && name == head && !done {
			done = true
			if _, err := agent.Reserve(context.Background(), "n1", []reserve.Entry{renewed}); err != nil {
				t.Error(err)
			}
		}
		return nil
	}
	b.pass()
	b.store.Objects.Before = nil
	got := b.held()["10.0.0.1"]
	if got.Sandbox != "bbbb" || !got.ReservedAt.Equal(now) {
		t.Fatalf("10.0.0.1 after the pass: %+v; the reservation renewed before the write was released", got)
	}
	if n := testutil.ToFloat64(b.c.metrics.releases.WithLabelValues("ttl")); n != 0 {
		t.Errorf("ttl releases %v: nothing the plan named was released", n)
	}
	if ev := b.eventReasons(); len(ev) != 0 {
		t.Errorf("events %v", ev)
	}
	b.pass()
	if got := b.held()["10.0.0.1"]; got.Sandbox != "bbbb" || !got.Seen.Equal(now) {
		t.Fatalf("the next pass: %+v; want it kept and stamped, an hour of TTL ahead", got)
	}
}
