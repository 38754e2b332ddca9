package robust

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The proxy passes everything at rate 0, fails about its share of
// requests at a rate, each failure one a Kubernetes client sees from a
// real API server, and counts them by kind.
func TestProxyFailsItsShare(t *testing.T) {
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer upstream.Close()
	target, _ := url.Parse(upstream.URL)
	tr, ok := upstream.Client().Transport.(*http.Transport)
	if !ok {
		t.Fatal("httptest's client has no *http.Transport")
	}
	p, err := startProxy(target, tr.TLSClientConfig.RootCAs, "secret", t.TempDir(), 7)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.maxDelay = 50 * time.Millisecond
	get := func() (int, string) { return get(p.URL) }
	for range 20 {
		if code, body := get(); code != http.StatusOK || body != "ok" {
			t.Fatalf("rate 0: %d %s", code, body)
		}
	}
	p.SetRate(500)
	failed := 0
	for range 100 {
		code, body := get()
		switch {
		case code == http.StatusOK:
		case code == 0 || strings.Contains(body, `"kind":"Status"`):
			failed++
		default:
			t.Fatalf("a failure no API server gives: %d %s", code, body)
		}
	}
	total := 0
	for _, n := range p.Injected() {
		total += n
	}
	if failed < 25 || failed > 75 || failed != total-p.Injected()[proxyDelay] {
		t.Fatalf("rate 500‰: %d of 100 failed; injected %v", failed, p.Injected())
	}
}

// get GETs the pods through the proxy as a client with the token does;
// code 0 is a connection that failed.
func get(url string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, url+"/api/v1/pods", nil)
	req.Header.Set("Authorization", "Bearer secret")
	// No keep-alive: Go's client would retry a GET whose reused
	// connection was reset, hiding the failure.
	resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
