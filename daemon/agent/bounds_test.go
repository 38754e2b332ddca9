package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

// A flood of offers that capo-ipam never reports on (requests it did not
// send) does not push out a real one: its report still ends the
// reservation. Past the bound a new offer is refused, until the flood's
// offers are older than any report can be.
func TestForgedOffersKeepTheRealOne(t *testing.T) {
	store := reservetest.NewStore(reserve.DefaultLimits)
	r, pod := returnsHolding(t, store)
	if !r.o.offers.remember(pod, []string{"10.0.0.3"}) {
		t.Fatal("the real offer was refused")
	}
	refused := 0
	for i := range 1000 {
		forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "evil", Name: fmt.Sprintf("p-%d", i), UID: types.UID(fmt.Sprintf("f-%d", i))}}
		if !r.o.offers.remember(forged, []string{"10.0.9.9"}) {
			refused++
		}
	}
	if refused != 1000-(maxOffered-1) {
		t.Fatalf("%d forged offers refused, want %d", refused, 1000-(maxOffered-1))
	}
	srv := serverFor(r, &fakeCluster{pod: pod})
	report := reportFor("10.0.0.3")
	w := httptest.NewRecorder()
	srv.handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, wire.ReturnOutcomePath, strings.NewReader(mustJSON(t, &report))))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.s.wait(ctx)
	if got := testutil.ToFloat64(r.o.metrics.returns.WithLabelValues("unoffered", "")); got != 0 {
		t.Fatalf("the real report was taken for one of no offer (%v)", got)
	}
	if held, _ := store.ListNode(ctx, "n1"); len(held) != 0 {
		t.Fatalf("the real return's reservation is still held: %+v", held)
	}
	r.o.offers.mu.Lock()
	for uid, o := range r.o.offers.byUID {
		o.at = o.at.Add(-offerTTL - time.Second)
		r.o.offers.byUID[uid] = o
	}
	r.o.offers.mu.Unlock()
	if !r.o.offers.remember(pod, []string{"10.0.0.3"}) {
		t.Fatal("an offer was refused once the others were past offerTTL")
	}
}

// Every path of the socket is under maxInFlight: past it, a request is
// answered 503 at once (capo-ipam journals a DEL, an ADD asks the API
// server), and no goroutine waits.
func TestEverySocketPathBounded(t *testing.T) {
	release := make(chan struct{})
	var blocked atomic.Int32
	cluster := &blockingCluster{release: release, blocked: &blocked}
	srv := &server{
		cluster: cluster, decider: &recordingDecider{}, metrics: newMetrics(), timeout: func() time.Duration { return time.Second },
		selectors: func() []selection.Selector { return nil }, offerer: &offerer{metrics: newMetrics(), offers: &offers{}}, settler: &settler{metrics: newMetrics(), offers: &offers{}, guard: &addrGuard{}},
		ipam: &handleIPAM{}, node: "n1",
	}
	h := srv.handler()
	var wg sync.WaitGroup
	for range maxInFlight {
		wg.Go(func() {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, wire.AnnotationsPath, strings.NewReader(`{"pod":{"namespace":"ns","name":"p"}}`)))
		})
	}
	for blocked.Load() < maxInFlight {
		time.Sleep(time.Millisecond)
	}
	for path, body := range map[string]string{
		wire.AnnotationsPath:   `{"pod":{"namespace":"ns","name":"p"}}`,
		wire.ReturnOutcomePath: `{"pod":{"uid":"u"},"ips":["10.0.0.3"],"outcome":"returned"}`,
		wire.ReservePath:       `{"containerID":"c","network":"n","pod":{"namespace":"ns","name":"p"}}`,
	} {
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
			done <- w
		}()
		select {
		case w := <-done:
			if w.Code != http.StatusServiceUnavailable {
				t.Errorf("%s past maxInFlight: %d %s", path, w.Code, w.Body)
			}
		case <-time.After(2 * time.Second):
			t.Errorf("%s past maxInFlight was not answered at once", path)
		}
	}
	close(release)
	wg.Wait()
}

// blockingCluster holds every pod lookup until release.
type blockingCluster struct {
	fakeCluster
	release chan struct{}
	blocked *atomic.Int32
}

func (c *blockingCluster) Pod(ctx context.Context, _ wire.PodRef) *corev1.Pod {
	c.blocked.Add(1)
	select {
	case <-c.release:
	case <-ctx.Done():
	}
	return nil
}

// An ADD is offered addresses only for a pod scheduled to this node: a
// request naming any other pod (capo-ipam never sends one) makes no offer.
func TestOfferOnlyToThisNodesPods(t *testing.T) {
	store := reservetest.NewStore(reserve.DefaultLimits)
	r, pod := returnsHolding(t, store)
	pod.Spec.NodeName = "n2"
	var asked atomic.Int32
	r.setMode(func() config.ReturnMode { asked.Add(1); return config.ReturnSameNode })
	ns := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}
	srv := serverFor(r, &fakeCluster{pod: pod, ns: ns})
	srv.node, srv.selectors = "n1", func() []selection.Selector { return nil }
	w := httptest.NewRecorder()
	srv.handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, wire.AnnotationsPath, strings.NewReader(`{"pod":{"namespace":"ns","name":"redis-3","uid":"pod-2"},"network":"k8s-pod-network"}`)))
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"return"`) || asked.Load() != 0 {
		t.Fatalf("answered %d %s; return mode read %d times", w.Code, w.Body, asked.Load())
	}
}
