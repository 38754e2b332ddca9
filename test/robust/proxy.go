package robust

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// Proxy stands between capo's clients (agents, controllers, capoctl) and
// the kube-apiserver, and fails a share of their requests as an overloaded
// or flaky control plane does: errors, conflicts on writes, dropped
// connections, slow answers, watches cut short. Calico's own components
// and the suite's traffic go to the API server directly.
type Proxy struct {
	URL        string // http://127.0.0.1:<port>
	Kubeconfig string // capo's clients' credentials, through the proxy
	srv        *http.Server
	rp         *httputil.ReverseProxy
	perMille   atomic.Int64  // of requests failed; 0: none
	maxDelay   time.Duration // of a slow answer or a watch before its cut

	mu  sync.Mutex
	rng *rand.Rand
	// Injected counts the failures by kind.
	injected map[string]int
}

// Proxy fault kinds.
const (
	proxy500      = "http-500"
	proxy503      = "http-503"
	proxyConflict = "http-409-on-write"
	proxyReset    = "connection-reset"
	proxyDelay    = "slow-answer"
	proxyWatchCut = "watch-cut"
)

// StartProxy serves on a loopback port, forwarding to the bed's API
// server, until Close; seed makes its choices.
func StartProxy(b *testbed.Bed, dir string, seed uint64) (*Proxy, error) {
	target, err := url.Parse(b.APIServerURL)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(b.CAFile())
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	return startProxy(target, roots, b.AdminToken(), dir, seed)
}

func startProxy(target *url.URL, roots *x509.CertPool, token, dir string, seed uint64) (*Proxy, error) {
	p := &Proxy{rng: rand.New(rand.NewPCG(seed, 0x70c5)), injected: map[string]int{}, maxDelay: 3 * time.Second}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			// client-go sends no bearer token to a plain-http server: the
			// proxy, on loopback, authenticates capo's clients itself.
			if r.Out.Header.Get("Authorization") == "" {
				r.Out.Header.Set("Authorization", "Bearer "+token)
			}
		},
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 64},
		FlushInterval: -1, // watches stream
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(l) }()
	p.URL = "http://" + l.Addr().String()
	p.Kubeconfig = filepath.Join(dir, "proxy.kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: %s\nusers:\n- name: user\n  user:\n    token: %s\ncontexts:\n- name: proxy\n  context: {cluster: proxy, user: user}\ncurrent-context: proxy\n", p.URL, token)
	if err := os.WriteFile(p.Kubeconfig, []byte(cfg), 0o600); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// SetRate fails perMille of every thousand requests from now on.
func (p *Proxy) SetRate(perMille int) { p.perMille.Store(int64(perMille)) }

// Injected is how many failures of each kind the proxy made so far.
func (p *Proxy) Injected() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.injected))
	for k, v := range p.injected {
		out[k] = v
	}
	return out
}

// Close stops serving.
func (p *Proxy) Close() { _ = p.srv.Close() }

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	kind, delay := p.pick(r)
	switch kind {
	case "":
		p.rp.ServeHTTP(w, r)
	case proxy500:
		status(w, http.StatusInternalServerError, "InternalError", "injected by the robustness proxy")
	case proxy503:
		status(w, http.StatusServiceUnavailable, "ServiceUnavailable", "injected by the robustness proxy")
	case proxyConflict:
		status(w, http.StatusConflict, "Conflict", "the object has been modified; please apply your changes to the latest version and try again (injected)")
	case proxyReset:
		reset(w)
	case proxyDelay:
		time.Sleep(delay)
		p.rp.ServeHTTP(w, r)
	case proxyWatchCut:
		ctx, cancel := context.WithTimeout(r.Context(), delay)
		defer cancel()
		p.rp.ServeHTTP(w, r.WithContext(ctx))
	}
}

// pick decides a request's fate: "" passes it untouched.
func (p *Proxy) pick(r *http.Request) (string, time.Duration) {
	rate := p.perMille.Load()
	if rate == 0 {
		return "", 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rng.Int64N(1000) >= rate {
		return "", 0
	}
	var kind string
	switch {
	case testbed.IsWatch(r):
		kind = proxyWatchCut
	default:
		kinds := []string{proxy500, proxy503, proxyReset, proxyDelay}
		if r.Method == http.MethodPut || r.Method == http.MethodPatch {
			kinds = append(kinds, proxyConflict, proxyConflict)
		}
		kind = kinds[p.rng.IntN(len(kinds))]
	}
	p.injected[kind]++
	return kind, p.maxDelay/10 + time.Duration(p.rng.Int64N(int64(p.maxDelay*9/10)))
}

func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`, msg, reason, code)
}

// reset drops the connection without an answer.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		status(w, http.StatusBadGateway, "InternalError", "connection dropped (injected)")
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // a reset, not a clean close
	}
	_ = conn.Close()
}
