package readiness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/daemon"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
)

// timedOutBatcher answers at once with its store's timeout: slow, not stuck.
type timedOutBatcher struct{}

func (timedOutBatcher) Reserve(context.Context, []reserve.Entry) (*reserve.Result, error) {
	return nil, context.DeadlineExceeded
}

func wantLive(t *testing.T, r *Readiness, want bool, has string) {
	t.Helper()
	ok, why := r.Live()
	if ok != want || !strings.Contains(why, has) {
		t.Fatalf("live = %v %q, want %v with %q", ok, why, want, has)
	}
}

// A batcher that stops answering fails /livez once past stuckAfter, and
// only then; its next answer makes the agent live again.
func TestLivenessFailsWhenTheBatcherIsStuck(t *testing.T) {
	store := reservetest.NewStore(reserve.DefaultLimits)
	now := time.Now()
	r := New(nil, func() time.Time { return now })
	r.Serve()
	p := testProber(store.Objects, r)
	p.every, p.timeout, p.batcher = 0, 10*time.Millisecond, stuckBatcher{}
	p.once(context.Background())
	wantReady(t, r, false, reasonTimeout)
	wantLive(t, r, true, "alive")

	now = now.Add(stuckAfter / 2)
	p.once(context.Background()) // still unanswered: the first start counts
	wantLive(t, r, true, "alive")
	now = now.Add(stuckAfter)
	wantLive(t, r, false, "batcher has not answered")

	p.batcher = timedOutBatcher{}
	p.once(context.Background())
	wantLive(t, r, true, "alive")
}

// A datastore that refuses every write makes the agent not ready, never
// not live: a restart would not help.
func TestLivenessIgnoresAFailingDatastore(t *testing.T) {
	now := time.Now()
	r := New(nil, func() time.Time { return now })
	r.Serve()
	r.failed(refusedByPolicy())
	now = now.Add(time.Hour)
	wantReady(t, r, false, reasonForbidden)
	wantLive(t, r, true, "alive")
}

// A loop that ended fails /livez, named in the body.
func TestLivenessFailsWhenALoopEnded(t *testing.T) {
	r := New(nil, time.Now)
	r.Serve()
	r.LoopStopped("drain")
	wantLive(t, r, false, "drain")
}

// /livez, /readyz and /healthz as the kubelet sees them.
func TestProbeEndpoints(t *testing.T) {
	r := New(nil, time.Now)
	r.Serve()
	r.landed()
	mux := http.NewServeMux()
	daemon.HandleProbes(mux, r.Ready, r.Live)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	code := func(path string) int {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/livez": 200, "/metrics": 404} {
		if got := code(path); got != want {
			t.Errorf("%s: %d, want %d", path, got, want)
		}
	}
	r.LoopStopped("batcher")
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 503, "/livez": 503} {
		if got := code(path); got != want {
			t.Errorf("after a loop ended, %s: %d, want %d", path, got, want)
		}
	}
}
