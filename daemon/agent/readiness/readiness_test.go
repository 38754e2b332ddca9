package readiness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
)

var ipresGR = schema.GroupResource{Group: "crd.projectcalico.org", Resource: "ipreservations"}

// refusedByPolicy is what libcalico-go returns when an admission policy
// or RBAC refuses the agent's write.
func refusedByPolicy() error {
	return cerrors.ErrorConnectionUnauthorized{Err: apierrors.NewForbidden(ipresGR, "capo.bucket-03", errors.New("denied by policy"))}
}

func wantReady(t *testing.T, r *Readiness, ready bool, reason string) {
	t.Helper()
	ok, got, _ := r.state()
	if ok != ready || got != reason {
		t.Fatalf("state = ready %v reason %q, want ready %v reason %q", ok, got, ready, reason)
	}
}

// Ready means "can reserve now": a refused write turns it off, a write
// that lands turns it on, and the agent's own cancellation says nothing.
func TestReadinessFollowsReservationWrites(t *testing.T) {
	m := testMetrics()
	r := New(m, time.Now)
	wantReady(t, r, false, reasonStarting)
	r.landed()
	wantReady(t, r, false, reasonStarting) // the socket is not open yet
	r.Serve()
	wantReady(t, r, true, "")
	if testutil.ToFloat64(m.CanReserve) != 1 {
		t.Fatal("capo_agent_can_reserve is not 1 while ready")
	}

	r.failed(fmt.Errorf("writing reservation object capo.bucket-03: %w", refusedByPolicy()))
	wantReady(t, r, false, reasonForbidden)
	if ok, body := r.Ready(); ok || !strings.Contains(body, "forbidden") || !strings.Contains(body, "denied by policy") {
		t.Fatalf("/readyz says %v %q; want the reason and the error", ok, body)
	}
	if testutil.ToFloat64(m.CanReserve) != 0 || testutil.ToFloat64(m.NotReady.WithLabelValues(reasonForbidden)) != 1 {
		t.Fatal("metrics do not show the refusal")
	}
	r.failed(context.Canceled)
	wantReady(t, r, false, reasonForbidden)
	r.landed()
	wantReady(t, r, true, "")
	r.failed(context.Canceled) // the agent stopping abandons a write
	wantReady(t, r, true, "")
	if testutil.ToFloat64(m.NotReady.WithLabelValues(reasonForbidden)) != 0 {
		t.Fatal("the old reason is still exported")
	}
}

// A loop that ends while the agent runs, or Run returning, outweighs a
// write that landed.
func TestReadinessNeedsLiveLoops(t *testing.T) {
	r := New(nil, time.Now)
	r.Serve()
	r.landed()
	r.LoopStopped("drainer")
	wantReady(t, r, false, reasonLoopStopped)
	if _, body := r.Ready(); !strings.Contains(body, "drainer") {
		t.Fatalf("/readyz does not name the loop: %q", body)
	}
	r.Stop()
	wantReady(t, r, false, reasonStopping)
}

func TestClassifyWriteFailures(t *testing.T) {
	cases := map[string]struct {
		err  error
		want string
	}{
		"RBAC or policy":  {refusedByPolicy(), reasonForbidden},
		"webhook refuses": {cerrors.ErrorDatastoreError{Err: apierrors.NewInvalid(schema.GroupKind{Group: "crd.projectcalico.org", Kind: "IPReservation"}, "x", nil)}, reasonRefused},
		"deadline":        {fmt.Errorf("writing: %w", context.DeadlineExceeded), reasonTimeout},
		"conflicts":       {cerrors.ErrorResourceUpdateConflict{}, reasonConflict},
		"connection":      {cerrors.ErrorDatastoreError{Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, reasonUnreachable},
		"other":           {errors.New("bucket full"), reasonError},
	}
	for name, tc := range cases {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("%s: classify = %q, want %q", name, got, tc.want)
		}
	}
}

// Only a write that changed something proves the agent can write: a
// reservation the controller already made lands nothing.
func TestWatchedStoreCountsOnlyWritesThatLanded(t *testing.T) {
	inner := reservetest.NewStore(reserve.DefaultLimits)
	r := New(nil, time.Now)
	r.Serve()
	s := watchedStore{Store: inner, r: r}
	e := reserve.Entry{IP: "10.0.0.7", Namespace: "db", Pod: "redis-0", Reason: reserve.ReasonCNIDel, ReservedAt: time.Now()}
	if _, err := inner.Reserve(context.Background(), "n1", []reserve.Entry{e}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(context.Background(), "n1", []reserve.Entry{e}); err != nil {
		t.Fatal(err)
	}
	wantReady(t, r, false, reasonStarting)

	inner.Objects.Before = func(verb, _ string) error {
		if verb == "update" || verb == "create" {
			return refusedByPolicy()
		}
		return nil
	}
	e.IP = "10.0.0.8"
	if _, err := s.Reserve(context.Background(), "n1", []reserve.Entry{e}); err == nil {
		t.Fatal("the refused write succeeded")
	}
	wantReady(t, r, false, reasonForbidden)
	inner.Objects.Before = nil
	if _, err := s.Reserve(context.Background(), "n1", []reserve.Entry{e}); err != nil {
		t.Fatal(err)
	}
	wantReady(t, r, true, "")
}

// testMetrics are readiness' metrics, on no registry.
func testMetrics() *Metrics {
	return &Metrics{
		CanReserve: prometheus.NewGauge(prometheus.GaugeOpts{Name: "can_reserve"}),
		NotReady:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "not_ready"}, []string{"reason"}),
	}
}

// What readiness awaits at start (capo back in the CNI chain) keeps the
// agent starting, its writes landing or not, until it holds; the metric
// follows once it does.
func TestReadinessAwaitsTheChain(t *testing.T) {
	m := testMetrics()
	r := New(m, time.Now)
	chain := make(chan struct{})
	r.Await("the CNI chain not checked yet", chain)
	r.landed()
	r.Serve()
	wantReady(t, r, false, reasonStarting)
	if ok, body := r.Ready(); ok || !strings.Contains(body, "CNI chain") {
		t.Fatalf("/readyz says %v %q; want what it awaits", ok, body)
	}
	close(chain)
	wantReady(t, r, true, "")
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(m.CanReserve) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("capo_agent_can_reserve not 1 once the chain was checked")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
