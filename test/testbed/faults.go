package testbed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// APIFaults stands between one process and the bed's kube-apiserver and
// fails the requests a test names, with the status a throttled or failing
// API server answers (429, 500): what Calico's client meets in a large
// cluster, and what no healthy bed shows. Every other request passes
// through, watches included; Cut ends the open ones, as a connection lost
// in an API outage does. Give the process Kubeconfig (the bed's admin
// credentials, through the proxy).
type APIFaults struct {
	Kubeconfig string
	Failed     atomic.Int64 // requests answered with a fault

	mu      sync.Mutex
	rules   []apiFault
	streams map[*http.Request]context.CancelFunc // the watches passing through
}

type apiFault struct {
	match  func(*http.Request) bool
	status int
}

// StartAPIFaults starts a proxy to the bed's API server for the test.
func (b *Bed) StartAPIFaults(t *testing.T) *APIFaults {
	t.Helper()
	up, err := url.Parse(b.APIServerURL)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.REST.CAData)
	if ca, err := os.ReadFile(b.REST.CAFile); err == nil {
		pool.AppendCertsFromPEM(ca)
	}
	f := &APIFaults{streams: map[*http.Request]context.CancelFunc{}}
	rp := httputil.NewSingleHostReverseProxy(up)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	rp.FlushInterval = -1 // watches stream
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status := f.fault(r); status != 0 {
			f.Failed.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the test bed","code":` + strconv.Itoa(status) + `}`))
			return
		}
		if IsWatch(r) {
			r = f.track(r)
			defer f.untrack(r)
		}
		rp.ServeHTTP(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	f.Kubeconfig = filepath.Join(dir, "kubeconfig")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := writeKubeconfig(f.Kubeconfig, srv.URL, ca, b.REST.BearerToken); err != nil {
		t.Fatal(err)
	}
	return f
}

// Fail answers every request match says yes to with status, until the
// returned func is called.
func (f *APIFaults) Fail(status int, match func(*http.Request) bool) (heal func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rule := apiFault{match: match, status: status}
	f.rules = append(f.rules, rule)
	n := len(f.rules) - 1
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.rules[n].match = nil
	}
}

// Cut ends every watch passing through that match says yes to, mid-stream
// (the proxy drops its connection), and returns how many it ended.
func (f *APIFaults) Cut(match func(*http.Request) bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for r, cancel := range f.streams {
		if match(r) {
			cancel()
			n++
		}
	}
	return n
}

// track is r with a context Cut can end.
func (f *APIFaults) track(r *http.Request) *http.Request {
	ctx, cancel := context.WithCancel(r.Context())
	r = r.WithContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams[r] = cancel
	return r
}

func (f *APIFaults) untrack(r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cancel, ok := f.streams[r]; ok {
		cancel()
		delete(f.streams, r)
	}
}

// IsWatch: r streams (a watch, or a list sent as one).
func IsWatch(r *http.Request) bool {
	q := r.URL.Query()
	return q.Get("watch") == "true" || q.Get("watch") == "1" || strings.Contains(r.URL.Path, "/watch/")
}

func (f *APIFaults) fault(r *http.Request) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rule := range f.rules {
		if rule.match != nil && rule.match(r) {
			return rule.status
		}
	}
	return 0
}

// Reads of resource (a Calico CRD's plural, in either of Calico's groups):
// a GET of one object or a list, not a watch.
func Reads(resource string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		if r.Method != http.MethodGet || IsWatch(r) {
			return false
		}
		p := r.URL.Path
		return (strings.HasPrefix(p, "/apis/crd.projectcalico.org/") || strings.HasPrefix(p, "/apis/projectcalico.org/")) &&
			strings.Contains(p, "/"+resource)
	}
}

// Collection is a list or a watch of a Kubernetes resource of group (""
// for the core group), in one namespace or all: what an informer reads,
// not a GET of one object.
func Collection(group, resource string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		if r.Method != http.MethodGet {
			return false
		}
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		var rest []string
		switch {
		case group == "" && len(parts) >= 2 && parts[0] == "api":
			rest = parts[2:]
		case group != "" && len(parts) >= 3 && parts[0] == "apis" && parts[1] == group:
			rest = parts[3:]
		default:
			return false
		}
		if len(rest) > 0 && rest[0] == "watch" {
			rest = rest[1:]
		}
		if len(rest) >= 3 && rest[0] == "namespaces" {
			rest = rest[2:]
		}
		return len(rest) == 1 && rest[0] == resource
	}
}

// Discovery is the API server's discovery: the groups and the resources
// each serves.
func Discovery(r *http.Request) bool {
	p := r.URL.Path
	if r.Method != http.MethodGet {
		return false
	}
	if p == "/api" || p == "/apis" {
		return true
	}
	parts := strings.Split(strings.Trim(p, "/"), "/")
	return parts[0] == "apis" && len(parts) == 3 // /apis/<group>/<version>
}
