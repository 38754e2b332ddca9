package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

// The socket is 0600 root, but any uid-0 container with the host's /run
// can write to it: every request is untrusted bytes.

// FuzzSocket sends one request of any body to one of the socket's paths,
// the agent built as New builds it on an in-memory datastore. Every answer
// is a status the client knows with a body that decodes; a request that
// decodes reaches the decider as decoded, but for what capo-ipam saw at
// ADD, which only its record on the host says; and what the agent says it
// reserved is in the datastore, readable.
func FuzzSocket(f *testing.F) {
	f.Add(uint8(0), []byte(`{"containerID":"abc","ifName":"eth0","network":"k8s-pod-network","pod":{"namespace":"ns","name":"redis-0","uid":"u1"}}`))
	f.Add(uint8(1), []byte(`{"containerID":"abc","network":"k8s-pod-network","pod":{"namespace":"ns","name":"redis-0"},"recordedIPs":["10.0.0.9","::ffff:10.0.0.10","FD00::1"],"atAdd":{"selected":true,"rule":"r"}}`))
	f.Add(uint8(0), []byte(`{"containerID":"a;b|c","network":"n","pod":{"namespace":"n|s","name":"p;q"},"recordedIPs":["10.0.0.9"]}`))
	f.Add(uint8(0), []byte(`{"containerID":"abc","network":"n","recordedIPs":["fe80::1%eth0"]}`))
	f.Add(uint8(0), []byte(`{"containerID":"abc","network":"n","atAdd":{"selected":false}} trailing`))
	f.Add(uint8(2), []byte(`{"pod":{"namespace":"ns","name":"redis-0","uid":"u1"}}`))
	f.Add(uint8(3), []byte(`{"pod":{"namespace":"ns","name":"redis-0"}}`))
	f.Add(uint8(4), []byte(`{"pod":{"namespace":"ns","name":"redis-0","uid":"u1"},"ips":["10.0.0.9"],"outcome":"returned"}`))
	f.Add(uint8(5), []byte(`{"pod":{"uid":"u1"},"ips":[],"outcome":"fell-back","reason":"x"}`))
	f.Add(uint8(0), []byte(`{"containerID":"abc","ifName":"eth0","network":"k8s-pod-network","pod":{"namespace":"evil","name":"redis-0"}}`))
	f.Add(uint8(1), []byte(`{"containerID":"3f9a1c","ifName":"eth0","network":"k8s-pod-network","pod":{"namespace":"evil","name":"kafka-0"}}`))
	f.Add(uint8(1), []byte(`{"containerID":"far","ifName":"eth0","network":"k8s-pod-network","pod":{"namespace":"ns","name":"redis-0"}}`))
	f.Add(uint8(1), []byte(`{"containerID":"3f9a1c","ifName":"eth0","network":"k8s-pod-network"}`))
	f.Add(uint8(1), []byte(`{"containerID":"abc","ifName":"eth0","network":"k8s-pod-network","pod":{"namespace":"x"}}`))
	f.Add(uint8(1), []byte(`{"containerID":"nopod","ifName":"eth0","network":"k8s-pod-network"}`))
	f.Add(uint8(1), []byte(`{"containerID":"nopod","ifName":"eth0","network":"k8s-pod-network","pod":{"namespace":"ns","name":"redis-0"}}`))
	f.Add(uint8(1), []byte(`{"containerID":"nobody","ifName":"eth0","network":"k8s-pod-network"}`))
	f.Add(uint8(1), []byte(`{"containerID":"nobody","ifName":"eth0","network":"k8s-pod-network","pod":{"namespace":"ns","name":"redis-0"}}`))
	f.Add(uint8(0), []byte(`[`))
	// Thousands of runs a second would each log a line or two.
	logs := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	f.Cleanup(func() { slog.SetDefault(logs) })
	f.Fuzz(func(t *testing.T, sel uint8, body []byte) {
		knowsPod := sel&1 == 1
		path := []string{wire.ReservePath, wire.AnnotationsPath, wire.ReturnOutcomePath}[int(sel>>1)%3]
		a := fuzzAgent(knowsPod)
		w := httptest.NewRecorder()
		a.srv.handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a.srv.settler.wait(ctx)

		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s: content type %q", path, ct)
		}
		if w.Code != http.StatusOK {
			var e wire.ErrorResponse
			if strictDecode(w.Body.Bytes(), &e) != nil || e.Error == "" {
				t.Fatalf("%s: %d with body %q", path, w.Code, w.Body)
			}
		}
		if w.Code == http.StatusBadRequest && strings.HasPrefix(decodeError(w), "request lacks ") {
			var req wire.ReserveRequest
			if path != wire.ReservePath || json.NewDecoder(bytes.NewReader(body)).Decode(&req) != nil || req.ContainerID != "" && req.Network != "" {
				t.Fatalf("%s: refused as incomplete: %q", path, body)
			}
			return
		}
		if len(body) > wire.MaxBodyBytes {
			return // refused, or not, by where the first value ends
		}
		// The socket reads the body's first JSON value, as json.Decoder
		// does: what follows it is ignored.
		decodes := json.NewDecoder(bytes.NewReader(body)).Decode(newRequest(path)) == nil
		if decodes == (w.Code == http.StatusBadRequest) {
			t.Fatalf("%s: %d for a body that decodes: %v: %q", path, w.Code, decodes, body)
		}
		if !decodes {
			return
		}
		switch path {
		case wire.ReservePath:
			checkReserve(t, a, body, w)
		case wire.AnnotationsPath:
			checkAnnotations(t, knowsPod, w)
		case wire.ReturnOutcomePath:
			if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != "{}" {
				t.Fatalf("a report is answered %d %q", w.Code, w.Body)
			}
		}
	})
}

func checkReserve(t *testing.T, a *fuzzedAgent, body []byte, w *httptest.ResponseRecorder) {
	var req wire.ReserveRequest
	_ = json.NewDecoder(bytes.NewReader(body)).Decode(&req)
	// Who the sandbox belongs to, and what capo-ipam saw at ADD, are taken
	// from the host's CNI state, never from the request: a request naming
	// another pod is refused and decides nothing; one naming none claims
	// nothing, and is decided for the host's pod.
	host, known := hostPod(&req)
	named := req.Pod.Name != ""
	if known && named && !samePod(host, req.Pod) || elsewhere(&req) {
		if w.Code != http.StatusForbidden || a.got != nil {
			t.Fatalf("a request for %+v of %+v's sandbox answered %d %q, decided %+v", req.Pod, host, w.Code, w.Body, a.got)
		}
		return
	}
	if w.Code != http.StatusOK && w.Code != http.StatusInternalServerError {
		t.Fatalf("reserve answered %d %q", w.Code, w.Body)
	}
	if !known || host.Name == "" {
		if a.got != nil {
			t.Fatalf("a sandbox of no pod the host knows was decided: %+v", a.got)
		}
	} else {
		checkDecidedForHost(t, a, req, host)
	}
	checkHeldFor(t, a, host)
	if w.Code != http.StatusOK {
		return
	}
	var resp wire.ReserveResponse
	if err := strictDecode(w.Body.Bytes(), &resp); err != nil {
		t.Fatalf("reserve answer %q: %v", w.Body, err)
	}
	if known && host.Name == "" && resp.Outcome != wire.NotSelected {
		t.Fatalf("a sandbox of no pod answered %q", resp.Outcome)
	}
	switch resp.Outcome {
	case wire.NotSelected, wire.NodeNotOptedIn, wire.NothingToReserve:
		if len(resp.IPs) > 0 {
			t.Fatalf("%s with addresses %v", resp.Outcome, resp.IPs)
		}
		return
	case wire.Reserved:
	default:
		t.Fatalf("outcome %q", resp.Outcome)
	}
	held, err := a.store.ListNode(context.Background(), "n1")
	if err != nil {
		t.Fatalf("reserved %v, and the node's reservations no longer read: %v", resp.IPs, err)
	}
	for _, ip := range resp.IPs {
		if addr, err := netip.ParseAddr(ip); err != nil || addr.String() != ip || addr.Zone() != "" {
			t.Fatalf("reserved %q, not one canonical address", ip)
		}
		if !containsIP(held, ip) {
			t.Fatalf("reserved %s, the datastore holds %+v", ip, held)
		}
	}
}

// checkDecidedForHost: the decider got the request as the host's CNI state
// has it: the record's pod, addresses and decision at ADD, else the
// allocation's addresses, and its pod when the request named none.
func checkDecidedForHost(t *testing.T, a *fuzzedAgent, req wire.ReserveRequest, host wire.PodRef) {
	t.Helper()
	req.RecordedIPs, req.AtAdd = nil, nil
	if rec := fuzzRecord(req.Network, req.ContainerID, req.IfName); rec != nil {
		req.Pod, req.RecordedIPs, req.AtAdd = rec.Pod, rec.IPs, rec.AtAdd
	} else {
		if req.Pod.Name == "" {
			req.Pod = host
		}
		for _, al := range fuzzAllocations {
			if al.handle == req.Handle() {
				req.RecordedIPs = append(req.RecordedIPs, al.ip)
			}
		}
	}
	if !reflect.DeepEqual(a.got, &req) {
		t.Fatalf("the decider got %+v, the host says %+v", a.got, &req)
	}
}

// checkHeldFor: a request never makes an entry for a pod other than the
// one the host's CNI state names for the sandbox.
func checkHeldFor(t *testing.T, a *fuzzedAgent, host wire.PodRef) {
	held, err := a.store.ListNode(context.Background(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range held {
		if e.Namespace != host.Namespace || e.Pod != host.Name || (host.UID != "" && e.PodUID != host.UID) {
			t.Fatalf("an entry for %s/%s (uid %s); the host names %+v", e.Namespace, e.Pod, e.PodUID, host)
		}
	}
}

func checkAnnotations(t *testing.T, knowsPod bool, w *httptest.ResponseRecorder) {
	if !knowsPod {
		if w.Code != http.StatusNotFound {
			t.Fatalf("an unknown pod's annotations answered %d", w.Code)
		}
		return
	}
	var resp wire.AnnotationsResponse
	if w.Code != http.StatusOK || strictDecode(w.Body.Bytes(), &resp) != nil || resp.Decision == nil {
		t.Fatalf("a known pod's annotations answered %d %q", w.Code, w.Body)
	}
	for k := range resp.Pod {
		if !strings.HasPrefix(k, "cni.projectcalico.org/") {
			t.Fatalf("annotation %s is not Calico's", k)
		}
	}
}

type fuzzedAgent struct {
	srv   *server
	store *reservetest.Store
	got   *wire.ReserveRequest // what the decider was asked
}

// fuzzAgent wires the agent as New does: the decider, the offerer, the
// settler and the held index on one store, n1 opted in; knowsPod puts a selected
// StatefulSet member, with Calico and other annotations, in the cache.
func fuzzAgent(knowsPod bool) *fuzzedAgent {
	a := &fuzzedAgent{store: reservetest.NewStore(reserve.DefaultLimits)}
	cluster := &fakeCluster{node: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}}
	if knowsPod {
		yes := true
		cluster.ns = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{selection.NamespaceLabel: selection.Enabled}}}
		cluster.pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "redis-0", UID: "u1",
			Annotations:     map[string]string{selection.PodAnnotation: selection.Enabled, "cni.projectcalico.org/ipv4pools": `["gold"]`, "other": "x"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "redis", UID: "set-1", Controller: &yes}},
		}, Spec: corev1.PodSpec{NodeName: "n1"}}
	}
	cfg := config.Default()
	m := newMetrics()
	held := newHeldIndex("n1")
	dec := &decider{
		cluster: cluster, ipam: &fakeIPAM{ips: []cnet.IP{cnet.MustParseIP("10.0.0.9")}}, reserve: storeReserver{a.store},
		selectors: func() []selection.Selector { return cfg.Selectors },
		observe:   func(time.Duration) {}, now: func() time.Time { return time.Unix(1_763_000_000, 0) },
		reserved: held.add,
	}
	mode, offered, guard := func() config.ReturnMode { return config.ReturnSameNode }, &offers{}, &addrGuard{}
	off := &offerer{
		node: "n1", store: a.store, mode: mode,
		held: held, timeout: time.Second, recorder: &record.FakeRecorder{}, metrics: m, offers: offered,
	}
	set := &settler{
		node: "n1", store: a.store, mode: mode, held: held, recorder: &record.FakeRecorder{}, metrics: m,
		pods: cluster.Pod, offers: offered, guard: guard,
	}
	dec.guard = guard
	a.srv = &server{
		decider: fuzzDecider{dec, &a.got}, cluster: cluster, selectors: dec.selectors,
		timeout: func() time.Duration { return 5 * time.Second }, metrics: m, offerer: off, settler: set, records: fuzzRecord,
		ipam: &handleIPAM{allocs: fuzzAllocations}, node: "n1",
	}
	return a
}

// fuzzRecord is capo-ipam's ADD record of one sandbox, k8s-pod-network's
// abc on eth0; the host holds no other.
func fuzzRecord(network, containerID, ifName string) *journal.AddrRecord {
	if network != "k8s-pod-network" || containerID != "abc" || ifName != "eth0" {
		return nil
	}
	return &journal.AddrRecord{
		Network: network, ContainerID: containerID, IfName: ifName, IPs: []string{"10.0.0.7", "fd00::7"},
		Pod:   wire.PodRef{Namespace: "ns", Name: "redis-0", UID: "u1"},
		AtAdd: &wire.Decision{Selected: true, Rule: "recorded at ADD"},
	}
}

type fuzzDecider struct {
	Decider
	got **wire.ReserveRequest
}

func (d fuzzDecider) Decide(ctx context.Context, req *wire.ReserveRequest) (*wire.ReserveResponse, error) {
	c := *req
	*d.got = &c
	return d.Decider.Decide(ctx, req)
}

// storeReserver writes each teardown at once, as the batcher does alone.
type storeReserver struct{ store reserve.Store }

func (s storeReserver) Reserve(ctx context.Context, es []reserve.Entry) (*reserve.Result, error) {
	return s.store.Reserve(ctx, "n1", es)
}

func newRequest(path string) any {
	switch path {
	case wire.ReservePath:
		return &wire.ReserveRequest{}
	case wire.AnnotationsPath:
		return &wire.AnnotationsRequest{}
	}
	return &wire.ReturnOutcome{}
}

func decodeError(w *httptest.ResponseRecorder) string {
	var e wire.ErrorResponse
	_ = json.Unmarshal(w.Body.Bytes(), &e)
	return e.Error
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func containsIP(es []reserve.Entry, ip string) bool {
	for _, e := range es {
		if e.IP == ip {
			return true
		}
	}
	return false
}
