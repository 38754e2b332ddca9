package wire

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve answers every request on a unix socket with status and body.
func serve(t *testing.T, status int, body string, delay time.Duration) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "a.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

func TestClientReserve(t *testing.T) {
	req := &ReserveRequest{ContainerID: "c", Network: "n"}
	cases := []struct {
		name, body, wantErr string
		status              int
		delay               time.Duration
	}{
		{name: "reserved", status: 200, body: `{"outcome":"reserved","ips":["10.0.0.1"]}`},
		{name: "agent error", status: 500, body: `{"error":"datastore down"}`, wantErr: "capo-agent: datastore down"},
		{name: "bare status", status: 503, body: ``, wantErr: "503"},
		{name: "unknown outcome", status: 200, body: `{"outcome":"maybe"}`, wantErr: `unknown outcome "maybe"`},
		{name: "not json", status: 200, body: `<html>`, wantErr: "not valid"},
		{name: "oversized", status: 200, body: `{"outcome":"reserved","rule":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, wantErr: "exceeds"},
		{name: "too slow", status: 200, body: `{"outcome":"reserved"}`, delay: 2 * time.Second, wantErr: "unreachable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClient(serve(t, tc.status, tc.body, tc.delay))
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			resp, err := c.Reserve(ctx, req)
			if tc.wantErr == "" {
				if err != nil || resp.Outcome != Reserved || len(resp.IPs) != 1 {
					t.Fatalf("%+v %v", resp, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
	_, err := NewClient(filepath.Join(t.TempDir(), "none.sock")).Reserve(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("no agent: %v", err)
	}
}
