package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capo-net/capo/pkg/wire"
)

// previousWire holds what the previous release's capo-ipam sent and its
// agent answered (pkg/wire/testdata/record).
const previousWire = "../../pkg/wire/testdata/0.1.0"

// The previous release's capo-ipam against this agent: its requests, byte
// for byte and with no version header, are answered with what it reads:
// a 200, a body of the types it knows and, for a teardown, one of the
// outcomes it accepts (any other would make it journal the DEL).
func TestPreviousCapoIPAMAnswered(t *testing.T) {
	known := previousOutcomes(t)
	for _, name := range []string{"request-reserve.http", "request-ipam-annotations.http", "request-return-outcome.http"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(previousWire, name))
			if err != nil {
				t.Fatal(err)
			}
			r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
			if err != nil {
				t.Fatal(err)
			}
			if r.Header.Get(wire.VersionHeader) != "" {
				t.Fatal("the previous release sent no version")
			}
			a := fuzzAgent(true) // a fresh one: no offer made, and a report of a return is ignored
			w := httptest.NewRecorder()
			a.srv.handler().ServeHTTP(w, r)
			if got := testutil.ToFloat64(a.srv.metrics.wireRequests.WithLabelValues("1", "answered")); got != 1 {
				t.Errorf("capo_agent_wire_requests_total{version=1} = %v", got)
			}
			if w.Code != http.StatusOK || w.Header().Get(wire.VersionHeader) != strconv.Itoa(wire.Version) {
				t.Fatalf("answered %d, v%s: %s", w.Code, w.Header().Get(wire.VersionHeader), w.Body)
			}
			switch r.URL.Path {
			case wire.ReservePath:
				var resp wire.ReserveResponse
				if err := strictDecode(w.Body.Bytes(), &resp); err != nil || !known[resp.Outcome] {
					t.Fatalf("outcome %q (%v); the previous capo-ipam knows %v", resp.Outcome, err, known)
				}
				if resp.Outcome != wire.Reserved {
					t.Fatalf("a selected pod's teardown: %q", resp.Outcome)
				}
			case wire.AnnotationsPath:
				var resp wire.AnnotationsResponse
				if err := strictDecode(w.Body.Bytes(), &resp); err != nil || resp.Decision == nil {
					t.Fatalf("%s (%v)", w.Body, err)
				}
			}
		})
	}
}

// A version the agent cannot read is refused with a reason capo-ipam
// logs as it journals the DEL; a newer capo-ipam is answered.
func TestWireVersionsRefusedOrAnswered(t *testing.T) {
	a := fuzzAgent(true)
	body := `{"containerID":"abc","network":"k8s-pod-network","ifName":"eth0","pod":{"namespace":"ns","name":"redis-0"}}`
	for v, want := range map[string]int{"x": http.StatusBadRequest, "0": http.StatusBadRequest, "2": http.StatusOK, "9": http.StatusOK} {
		r := httptest.NewRequest(http.MethodPost, wire.ReservePath, strings.NewReader(body))
		r.Header.Set(wire.VersionHeader, v)
		w := httptest.NewRecorder()
		a.srv.handler().ServeHTTP(w, r)
		if w.Code != want || (want != http.StatusOK && !strings.Contains(decodeError(w), "not a wire version")) {
			t.Errorf("v%s: %d %s", v, w.Code, w.Body)
		}
	}
	for label, want := range map[[2]string]float64{{"invalid", "refused"}: 2, {"2", "answered"}: 1, {"newer", "answered"}: 1} {
		if got := testutil.ToFloat64(a.srv.metrics.wireRequests.WithLabelValues(label[0], label[1])); got != want {
			t.Errorf("capo_agent_wire_requests_total%v = %v, want %v", label, got, want)
		}
	}
}

// previousOutcomes are the teardown outcomes the previous release's agent
// answered, which its capo-ipam accepts.
func previousOutcomes(t *testing.T) map[wire.Outcome]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(previousWire, "response-reserve-*.json"))
	if err != nil || len(files) != 4 {
		t.Fatalf("%v %v", files, err)
	}
	out := map[wire.Outcome]bool{}
	for _, f := range files {
		var r wire.ReserveResponse
		b, err := os.ReadFile(f)
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err != nil {
			t.Fatal(err)
		}
		out[r.Outcome] = true
	}
	return out
}
