package agent

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/capo-net/capo/daemon/agent/readiness"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// The probes live on their own address, not beside /metrics; with both
// addresses the same, one listener serves all.
func TestProbesServedApartFromMetrics(t *testing.T) {
	get := func(url string) int {
		for i := 0; ; i++ {
			resp, err := http.Get(url)
			if err == nil {
				resp.Body.Close()
				return resp.StatusCode
			}
			if i == 50 {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	metricsAddr, healthAddr := freeAddr(t), freeAddr(t)
	for _, tc := range []struct {
		health        string
		metricsReadyz int
	}{{healthAddr, 404}, {metricsAddr, 503}} {
		a := &Agent{opts: Options{MetricsAddr: metricsAddr, HealthAddr: tc.health}, metrics: newMetrics()}
		a.readiness = readiness.New(&readiness.Metrics{CanReserve: a.metrics.canReserve, NotReady: a.metrics.notReady}, time.Now)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.serveMetrics(ctx) }()
		if got := get("http://" + metricsAddr + "/metrics"); got != 200 {
			t.Errorf("health at %s: /metrics %d", tc.health, got)
		}
		if got := get("http://" + metricsAddr + "/readyz"); got != tc.metricsReadyz {
			t.Errorf("health at %s: /readyz on the metrics address %d, want %d", tc.health, got, tc.metricsReadyz)
		}
		if got := get("http://" + tc.health + "/livez"); got != 200 {
			t.Errorf("health at %s: /livez %d", tc.health, got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
