package daemon

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// listen serves h within lim on a loopback port until the test ends.
func listen(t *testing.T, h http.Handler, lim Limits) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = serveOn(ctx, l, h, lim); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().String()
}

// Past MaxInFlight requests at once the next is answered 503 at once,
// not queued behind slow ones.
func TestListenerCapsRequestsInFlight(t *testing.T) {
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(2)
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { entered.Done(); <-release })
	lim := DefaultLimits
	lim.MaxInFlight = 2
	addr := listen(t, h, lim)
	defer close(release)
	for range 2 {
		go func() {
			if resp, err := http.Get("http://" + addr); err == nil {
				resp.Body.Close()
			}
		}()
	}
	entered.Wait()
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + addr)
	if err != nil {
		t.Fatalf("a third request at once waits: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a third request at once: %d", resp.StatusCode)
	}
}

// A client that sends its body slowly, or keeps an idle connection, is
// cut off.
func TestListenerCutsSlowAndIdleClients(t *testing.T) {
	lim := DefaultLimits
	lim.Read, lim.Idle = 300*time.Millisecond, 300*time.Millisecond
	addr := listen(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }), lim)

	slow := dial(t, addr)
	_, _ = slow.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc"))
	if !closedWithin(slow, 3*time.Second) {
		t.Error("a request whose body never ends keeps its connection")
	}

	idle := dial(t, addr)
	_, _ = idle.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	if resp, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%v %v", resp, err)
	}
	if !closedWithin(idle, 3*time.Second) {
		t.Error("an idle keep-alive connection stays open")
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reads c until the server closes it or d passes.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c) // nil at EOF
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout()
}

// A cached view is computed once for many readers within its time, and
// again after it.
func TestCachedJSON(t *testing.T) {
	var calls atomic.Int32
	c := CachedJSON(time.Hour, func() any { return map[string]int32{"n": calls.Add(1)} }).(*cached)
	now := time.Unix(0, 0)
	c.now = func() time.Time { return now }
	addr := listen(t, c, DefaultLimits)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := http.Get("http://" + addr); err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("10 readers computed it %d times", n)
	}
	c.mu.Lock()
	now = now.Add(2 * time.Hour)
	c.mu.Unlock()
	resp, err := http.Get("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "{\"n\":2}\n" {
		t.Fatalf("after its time: %s", b)
	}
}
