package daemon

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A renamed metric is served under both names, the old one's help naming
// the new; nothing else is copied.
func TestRenamedServedUnderOldName(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capo_controller_x_total", Help: "Xs."}, []string{"reason"})
	c.WithLabelValues("ttl").Add(3)
	other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "capo_controller_y", Help: "Y."})
	reg.MustRegister(c, other)
	mux, err := MetricsMux(reg, map[string]string{"capo_controller_x_total": "capo_x_total"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	text := string(b)
	for _, want := range []string{
		`capo_controller_x_total{reason="ttl"} 3`,
		`capo_x_total{reason="ttl"} 3`,
		"# HELP capo_x_total Deprecated, removed in the next minor release: renamed capo_controller_x_total. Xs.",
		"capo_build_info{",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "\ncapo_controller_y 0") != 1 || strings.Contains(text, "capo_y") {
		t.Errorf("a metric not renamed was copied:\n%s", text)
	}
}
