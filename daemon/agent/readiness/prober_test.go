package readiness

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
)

func refuseWrites(objs *reservetest.Objects, refuse *atomic.Bool) {
	objs.Before = func(verb, _ string) error {
		if refuse.Load() && (verb == "update" || verb == "create") {
			return refusedByPolicy()
		}
		return nil
	}
}

func testProber(objs *reservetest.Objects, r *Readiness) *Prober {
	return &Prober{objs: objs, bucket: calicostore.BucketOf("n1"), r: r, every: time.Minute, retry: 10 * time.Millisecond, timeout: time.Second}
}

// A not-ready agent gets no teardowns to prove itself with: the prober's
// own harmless write (its bucket rewritten unchanged) turns it ready once
// the datastore accepts its writes again, and not before.
func TestProberRecoversOnlyWhenWritesLand(t *testing.T) {
	store := reservetest.NewStore(reserve.DefaultLimits)
	e := reserve.Entry{IP: "10.0.0.7", Namespace: "db", Pod: "redis-0", Reason: reserve.ReasonCNIDel, ReservedAt: time.Now()}
	if _, err := store.Reserve(context.Background(), "n1", []reserve.Entry{e}); err != nil {
		t.Fatal(err)
	}
	before, _ := store.Objects.Object(calicostore.BucketName(calicostore.BucketOf("n1"), 0))
	r := New(nil, time.Now)
	r.Serve()
	var refuse atomic.Bool
	refuse.Store(true)
	refuseWrites(store.Objects, &refuse)
	r.failed(refusedByPolicy())
	p := testProber(store.Objects, r)
	p.once(context.Background())
	wantReady(t, r, false, reasonForbidden)

	refuse.Store(false)
	p.once(context.Background())
	wantReady(t, r, true, "")
	after, _ := store.Objects.Object(before.Name)
	if len(after.CIDRs) != 1 || after.Annotations[calicostore.MetadataAnnotation] != before.Annotations[calicostore.MetadataAnnotation] {
		t.Fatalf("the probe changed the bucket: %+v", after)
	}
}

// Ready and proven by a real write within the period, the prober costs
// nothing; past it, it writes.
func TestProberIsCheapWhileRealWritesProveIt(t *testing.T) {
	store := reservetest.NewStore(reserve.DefaultLimits)
	now := time.Now()
	r := New(nil, func() time.Time { return now })
	r.Serve()
	r.landed()
	p := testProber(store.Objects, r)
	p.once(context.Background())
	if n := store.Objects.Calls("get") + store.Objects.Calls("update") + store.Objects.Calls("create"); n != 0 {
		t.Fatalf("%d datastore calls while proven", n)
	}
	now = now.Add(2 * time.Minute)
	p.once(context.Background())
	if store.Objects.Calls("get") != 1 {
		t.Fatal("the prober did not check once the proof was old")
	}
	if len(store.Objects.Names()) != 0 {
		t.Fatalf("a ready agent made objects: %v", store.Objects.Names())
	}
}

// With no bucket, a failed agent proves itself by creating the empty
// head, as its next reservation would.
func TestProberCreatesTheHeadOnlyWhenFailed(t *testing.T) {
	store := reservetest.NewStore(reserve.DefaultLimits)
	r := New(nil, time.Now)
	r.Serve()
	p := testProber(store.Objects, r)
	p.once(context.Background())
	wantReady(t, r, true, "")
	if len(store.Objects.Names()) != 0 {
		t.Fatalf("starting made objects: %v", store.Objects.Names())
	}
	r.failed(refusedByPolicy())
	p.once(context.Background())
	wantReady(t, r, true, "")
	if names := store.Objects.Names(); len(names) != 1 || names[0] != calicostore.BucketName(calicostore.BucketOf("n1"), 0) {
		t.Fatalf("objects %v", names)
	}
}

type stuckBatcher struct{}

func (stuckBatcher) Reserve(ctx context.Context, _ []reserve.Entry) (*reserve.Result, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A write path that does not answer cannot reserve either.
func TestProberNotReadyWhenTheBatcherIsStuck(t *testing.T) {
	store := reservetest.NewStore(reserve.DefaultLimits)
	r := New(nil, time.Now)
	r.Serve()
	r.landed()
	p := testProber(store.Objects, r)
	p.every, p.timeout, p.batcher = 0, 50*time.Millisecond, stuckBatcher{}
	p.once(context.Background())
	wantReady(t, r, false, reasonTimeout)
}

// The loop probes again soon after a failure and turns ready by itself.
func TestProberLoopRetriesWhileNotReady(t *testing.T) {
	store := reservetest.NewStore(reserve.DefaultLimits)
	var refuse atomic.Bool
	refuse.Store(true)
	refuseWrites(store.Objects, &refuse)
	r := New(nil, time.Now)
	r.Serve()
	r.failed(refusedByPolicy())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go testProber(store.Objects, r).Run(ctx)
	time.Sleep(100 * time.Millisecond)
	wantReady(t, r, false, reasonForbidden)
	refuse.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for ok, _, _ := r.state(); !ok; ok, _, _ = r.state() {
		if time.Now().After(deadline) {
			t.Fatal("the prober did not turn the agent ready once writes were accepted")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
