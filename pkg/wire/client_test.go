package wire

import (
	"context"
	"errors"
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
	if ans := (*AnswerError)(nil); err == nil || !strings.Contains(err.Error(), "unreachable") || errors.As(err, &ans) {
		t.Fatalf("no agent: %v", err)
	}
}

// An answer other than a decision says which it is: capo-ipam words its
// log by it, and a refusal (403) is no unreachable agent.
func TestClientAnswerError(t *testing.T) {
	for status, refused := range map[int]bool{403: true, 500: false, 503: false} {
		_, err := NewClient(serve(t, status, `{"error":"why"}`, 0)).Reserve(context.Background(), &ReserveRequest{ContainerID: "c", Network: "n"})
		var ans *AnswerError
		if !errors.As(err, &ans) || ans.Refused() != refused || ans.Msg != "why" || err.Error() != "capo-agent: why" {
			t.Fatalf("%d: %#v", status, err)
		}
	}
}

// serveRaw answers every connection with answer, byte for byte, once it has
// read the request's head, then holds the connection open for hold before
// it closes it.
func serveRaw(t *testing.T, answer string, hold time.Duration) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "a.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, _ = conn.Read(make([]byte, 4096))
				_, _ = conn.Write([]byte(answer))
				time.Sleep(hold)
			}()
		}
	}()
	return sock
}

// The client reads answers itself; these are the shapes an HTTP/1.0
// exchange can take besides net/http's own.
func TestClientReadsAnswersByHand(t *testing.T) {
	cases := []struct {
		name, answer, wantErr string
	}{
		{name: "no length, ends at close", answer: "HTTP/1.0 200 OK\r\n\r\n{\"outcome\":\"not-selected\"}"},
		{name: "length shorter than what came", answer: "HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\n{\"outcome\":\"not-selected\"}trailing"},
		{name: "cut short", answer: "HTTP/1.0 200 OK\r\nContent-Length: 40\r\n\r\n{\"outcome\":", wantErr: "ended after 11 of 40 bytes"},
		{name: "declared too large", answer: "HTTP/1.0 200 OK\r\nContent-Length: 9999999\r\n\r\n", wantErr: "exceeds"},
		{name: "not http", answer: "SSH-2.0-OpenSSH\r\n", wantErr: "not an HTTP answer"},
		{name: "closed without a word", answer: "", wantErr: "unreachable"},
		{name: "bad length", answer: "HTTP/1.0 200 OK\r\nContent-Length: x\r\n\r\n", wantErr: "bad Content-Length"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := NewClient(serveRaw(t, tc.answer, 0)).Reserve(context.Background(), &ReserveRequest{ContainerID: "c", Network: "n"})
			if tc.wantErr == "" {
				if err != nil || resp.Outcome != NotSelected {
					t.Fatalf("%+v %v", resp, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// A context cancelled while the agent thinks ends the call at once.
func TestClientCancelledMidCall(t *testing.T) {
	c := NewClient(serve(t, 200, `{"outcome":"reserved"}`, 5*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if _, err := c.Reserve(ctx, &ReserveRequest{}); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a cancelled call took %s", d)
	}
}

// An answer with a length is read to its length: an agent that keeps the
// connection open after it does not hold the call.
func TestClientDoesNotWaitForCloseAfterALength(t *testing.T) {
	sock := serveRaw(t, "HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\n{\"outcome\":\"not-selected\"}", 3*time.Second)
	start := time.Now()
	resp, err := NewClient(sock).Reserve(context.Background(), &ReserveRequest{})
	if err != nil || resp.Outcome != NotSelected {
		t.Fatalf("%+v %v", resp, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the call waited %s for the connection to close", d)
	}
}
