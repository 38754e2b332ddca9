package plugin

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/wire"
)

// Whatever an agent of another release answers that capo-ipam cannot use
// (its version refused, a version it cannot read, an outcome it does not
// know) ends in the journal: the DEL succeeds, nothing is released, and
// the agent replays it.
func TestDelJournalsAnswersItCannotUse(t *testing.T) {
	cases := []struct {
		name, version, body string
		status              int
	}{
		{"this capo-ipam's version refused", "3", `{"error":"capo-ipam speaks wire v2 and this capo-agent answers v3 or later"}`, http.StatusBadRequest},
		{"a version it cannot read", "three", `{"outcome":"reserved"}`, http.StatusOK},
		{"an outcome it does not know", "3", `{"outcome":"reserved-elsewhere"}`, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "agent.sock")
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set(wire.VersionHeader, tc.version)
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}), ReadHeaderTimeout: time.Second}
			go func() { _ = srv.Serve(l) }()
			t.Cleanup(func() { _ = srv.Close() })

			d := &fakeDelegate{}
			j := &fakeJournal{addrs: map[string][]string{"k8s-pod-network/c1/eth0": {"10.0.0.1"}}}
			err = del(context.Background(), delArgs(), mustConf(t, delConf), delDeps{agent: wire.NewClient(sock), delegate: d, journal: j, env: map[string]string{}})
			if err != nil {
				t.Fatalf("DEL blocked: %v", err)
			}
			if len(d.calls) != 0 || len(j.records) != 1 {
				t.Fatalf("delegate calls %v, journal records %d: want none released, one journaled", d.calls, len(j.records))
			}
			t.Logf("journaled: %s", j.records[0].Why)
		})
	}
}
