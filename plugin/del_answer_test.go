package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capo-net/capo/pkg/wire"
)

// agentAnswering serves an agent's socket that answers every request with
// status and, unless it is empty, an error saying msg.
func agentAnswering(t *testing.T, status int, msg string) *wire.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if msg != "" {
			_ = json.NewEncoder(w).Encode(wire.ErrorResponse{Error: msg})
		}
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return wire.NewClient(sock)
}

// A DEL the agent does not decide is journaled, and capo-ipam's log says
// what happened: a refusal, an answer without a decision, or no answer at
// all (only then may capo be uninstalled, and only then is that asked).
func TestDelSaysWhyTheAgentDidNotDecide(t *testing.T) {
	for _, tc := range []struct {
		name      string
		agent     Agent
		wantLog   string
		wantGone  bool
		wantNotIn string
	}{
		{name: "refused", agent: agentAnswering(t, http.StatusForbidden, "refused: the request names pod kafka/broker-0, but ..."), wantLog: "capo-agent refused the request", wantNotIn: "no answer"},
		{name: "not decided", agent: agentAnswering(t, http.StatusInternalServerError, "reading Calico handle: etcd unreachable"), wantLog: "capo-agent answered without deciding", wantNotIn: "no answer"},
		{name: "busy, no words", agent: agentAnswering(t, http.StatusServiceUnavailable, ""), wantLog: "capo-agent answered without deciding", wantNotIn: "no answer"},
		{name: "unreachable", agent: wire.NewClient(filepath.Join(t.TempDir(), "none.sock")), wantLog: "capo-agent gave no answer", wantGone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			prev := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
			defer slog.SetDefault(prev)
			d, j, asked := &fakeDelegate{}, &fakeJournal{}, false
			gone := func(context.Context) (bool, string) { asked = true; return false, "capo-agent's pod exists" }
			err := del(context.Background(), delArgs(), mustConf(t, delConf), delDeps{agent: tc.agent, delegate: d, journal: j, gone: gone})
			if err != nil || len(j.records) != 1 || len(d.calls) != 0 {
				t.Fatalf("err %v, %d journal records, delegate calls %v: want journaled, not released", err, len(j.records), d.calls)
			}
			if line := logs.String(); !strings.Contains(line, tc.wantLog) || !strings.Contains(line, "DEL journaled") || tc.wantNotIn != "" && strings.Contains(line, tc.wantNotIn) {
				t.Fatalf("log does not say %q:\n%s", tc.wantLog, logs.String())
			}
			if asked != tc.wantGone {
				t.Fatalf("asked whether capo is uninstalled: %v, want %v", asked, tc.wantGone)
			}
		})
	}
}
