package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capo-net/capo/pkg/wire"
)

// allocation is one address calico-ipam assigned, with the attributes it
// records.
type allocation struct{ ip, handle, namespace, pod, node string }

// handleIPAM is Calico IPAM holding allocations, read by handle and by
// address as libcalico-go reads them.
type handleIPAM struct {
	allocs []allocation
	err    error
}

func (f *handleIPAM) IPsByHandle(_ context.Context, handle string) ([]cnet.IP, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []cnet.IP
	for _, a := range f.allocs {
		if a.handle == handle {
			out = append(out, cnet.MustParseIP(a.ip))
		}
	}
	if len(out) == 0 {
		return nil, cerrors.ErrorResourceDoesNotExist{Identifier: handle}
	}
	return out, nil
}

func (f *handleIPAM) GetAssignmentAttributes(_ context.Context, ip cnet.IP) (map[string]string, *string, error) {
	for _, a := range f.allocs {
		if cnet.MustParseIP(a.ip).Equal(ip.IP) {
			h := a.handle
			return map[string]string{ipam.AttributeNamespace: a.namespace, ipam.AttributePod: a.pod, ipam.AttributeNode: a.node}, &h, nil
		}
	}
	return nil, nil, cerrors.ErrorResourceDoesNotExist{Identifier: ip.String()}
}

// fuzzAllocations are Calico's allocations the fuzzed agent sees: the
// recorded sandbox abc's, kafka-0's on this node with no record (as a
// capo-ipam of 0.1.0 left it), one on another node, one an IPAM call with
// no pod in its CNI_ARGS made on this node, and one assigned by hand (no
// pod, no node).
var fuzzAllocations = []allocation{
	{ip: "10.0.0.7", handle: "k8s-pod-network.abc", namespace: "ns", pod: "redis-0", node: "n1"},
	{ip: "fd00::7", handle: "k8s-pod-network.abc", namespace: "ns", pod: "redis-0", node: "n1"},
	{ip: "10.65.0.7", handle: "k8s-pod-network.3f9a1c", namespace: "kafka", pod: "kafka-0", node: "n1"},
	{ip: "10.0.0.20", handle: "k8s-pod-network.far", namespace: "ns", pod: "redis-0", node: "n2"},
	{ip: "10.0.0.30", handle: "k8s-pod-network.nopod", node: "n1"},
	{ip: "10.0.0.31", handle: "k8s-pod-network.nobody"},
}

// hostPod is the pod the host's CNI state names for a sandbox: the ADD
// record's, else Calico's allocation's on this node; ok false: none.
func hostPod(req *wire.ReserveRequest) (wire.PodRef, bool) {
	if rec := fuzzRecord(req.Network, req.ContainerID, req.IfName); rec != nil {
		return rec.Pod, true
	}
	for _, a := range fuzzAllocations {
		if a.handle == req.Handle() && a.node == "n1" {
			return wire.PodRef{Namespace: a.namespace, Name: a.pod}, true
		}
	}
	return wire.PodRef{}, false
}

// elsewhere: the host has no record of the sandbox, and Calico allocated
// its handle on another node (a request and an allocation that both name
// no pod concern no pod, wherever it is).
func elsewhere(req *wire.ReserveRequest) bool {
	if fuzzRecord(req.Network, req.ContainerID, req.IfName) != nil {
		return false
	}
	for _, a := range fuzzAllocations {
		if a.handle == req.Handle() && a.node != "n1" && (req.Pod.Name != "" || a.pod != "") {
			return true
		}
	}
	return false
}

// The forged request of issue 27: another namespace's pod names a
// sandbox of this node. It is refused, counted, and reserves nothing,
// whether the host has capo-ipam's ADD record of the sandbox or only
// Calico's allocation; and no request makes capo read a handle of another
// node.
func TestForgedReserveRefused(t *testing.T) {
	cases := []struct {
		name, container, why string
		pod                  wire.PodRef
	}{
		{name: "record names another pod", container: "abc", why: refusedRecord, pod: wire.PodRef{Namespace: "evil", Name: "redis-0"}},
		{name: "record names another incarnation", container: "abc", why: refusedRecord, pod: wire.PodRef{Namespace: "ns", Name: "redis-0", UID: "u2"}},
		{name: "allocation names another pod", container: "3f9a1c", why: refusedHandle, pod: wire.PodRef{Namespace: "evil", Name: "kafka-0"}},
		{name: "allocation of another node", container: "far", why: refusedNode, pod: wire.PodRef{Namespace: "ns", Name: "redis-0"}},
		{name: "allocation names no pod", container: "nopod", why: refusedUnknown, pod: wire.PodRef{Namespace: "ns", Name: "redis-0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := fuzzAgent(true)
			req := &wire.ReserveRequest{ContainerID: tc.container, IfName: "eth0", Network: "k8s-pod-network", Pod: tc.pod}
			w := httptest.NewRecorder()
			a.srv.handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, wire.ReservePath, strings.NewReader(mustJSON(t, req))))
			if w.Code != http.StatusForbidden || !strings.Contains(decodeError(w), "refused: the request names pod "+tc.pod.Namespace+"/") {
				t.Fatalf("answered %d %s", w.Code, w.Body)
			}
			if a.got != nil {
				t.Fatalf("decided %+v", a.got)
			}
			if held, _ := a.store.ListNode(context.Background(), "n1"); len(held) != 0 {
				t.Fatalf("reserved %+v", held)
			}
			if got := testutil.ToFloat64(a.srv.metrics.refused.WithLabelValues(tc.why)); got != 1 {
				t.Fatalf("capo_agent_socket_refused_total{why=%s} = %v", tc.why, got)
			}
		})
	}
}

// capo-ipam's own DEL is decided for the pod the host names: the record's,
// UID included, else the allocation's; a handle that cannot be read is no
// answer (capo-ipam journals).
func TestReserveForTheHostsPod(t *testing.T) {
	for _, tc := range []struct {
		container string
		asked     wire.PodRef
		want      wire.PodRef
		ips       []string
	}{
		{container: "abc", asked: wire.PodRef{Namespace: "ns", Name: "redis-0"}, want: wire.PodRef{Namespace: "ns", Name: "redis-0", UID: "u1"}, ips: []string{"10.0.0.7", "fd00::7"}},
		{container: "3f9a1c", asked: wire.PodRef{Namespace: "kafka", Name: "kafka-0", UID: "k"}, want: wire.PodRef{Namespace: "kafka", Name: "kafka-0", UID: "k"}, ips: []string{"10.65.0.7"}},
	} {
		a := fuzzAgent(true)
		req := &wire.ReserveRequest{ContainerID: tc.container, IfName: "eth0", Network: "k8s-pod-network", Pod: tc.asked}
		w := httptest.NewRecorder()
		a.srv.handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, wire.ReservePath, strings.NewReader(mustJSON(t, req))))
		if w.Code != http.StatusOK || a.got == nil || a.got.Pod != tc.want || strings.Join(a.got.RecordedIPs, ",") != strings.Join(tc.ips, ",") {
			t.Fatalf("%s: answered %d %s, decided %+v", tc.container, w.Code, w.Body, a.got)
		}
	}
	a := fuzzAgent(true)
	a.srv.ipam = &handleIPAM{err: errors.New("etcd unreachable")}
	w := httptest.NewRecorder()
	body := `{"containerID":"3f9a1c","ifName":"eth0","network":"k8s-pod-network","pod":{"namespace":"kafka","name":"kafka-0"}}`
	a.srv.handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, wire.ReservePath, strings.NewReader(body)))
	if w.Code != http.StatusInternalServerError || !strings.Contains(decodeError(w), "etcd unreachable") {
		t.Fatalf("answered %d %s", w.Code, w.Body)
	}
}

// An IPAM call whose CNI_ARGS carry no pod (a direct caller, a runtime
// other than the kubelet's) is capo-ipam's own traffic, not a forgery: it
// is decided for the pod the host names, or, when the host names none
// either (on this node, or on none: an address assigned by hand),
// answered not-selected at once so capo-ipam releases. None of it counts
// as refused.
func TestReserveNamingNoPod(t *testing.T) {
	for _, tc := range []struct {
		container string
		outcome   wire.Outcome
		decided   *wire.PodRef // nil: the decider is not asked
	}{
		{container: "nopod", outcome: wire.NotSelected},
		{container: "nobody", outcome: wire.NotSelected},
		{container: "3f9a1c", outcome: wire.Reserved, decided: &wire.PodRef{Namespace: "kafka", Name: "kafka-0"}},
		{container: "abc", outcome: wire.Reserved, decided: &wire.PodRef{Namespace: "ns", Name: "redis-0", UID: "u1"}},
	} {
		a := fuzzAgent(true)
		req := &wire.ReserveRequest{ContainerID: tc.container, IfName: "eth0", Network: "k8s-pod-network"}
		w := httptest.NewRecorder()
		a.srv.handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, wire.ReservePath, strings.NewReader(mustJSON(t, req))))
		var resp wire.ReserveResponse
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &resp) != nil || resp.Outcome != tc.outcome {
			t.Fatalf("%s: answered %d %s", tc.container, w.Code, w.Body)
		}
		if (tc.decided == nil) != (a.got == nil) || tc.decided != nil && a.got.Pod != *tc.decided {
			t.Fatalf("%s: decided %+v, want for %+v", tc.container, a.got, tc.decided)
		}
		for _, why := range []string{refusedRecord, refusedHandle, refusedNode, refusedUnknown} {
			if got := testutil.ToFloat64(a.srv.metrics.refused.WithLabelValues(why)); got != 0 {
				t.Fatalf("%s: capo_agent_socket_refused_total{why=%s} = %v", tc.container, why, got)
			}
		}
		if got := testutil.ToFloat64(a.srv.metrics.decisions.WithLabelValues(string(tc.outcome), "socket")); got != 1 {
			t.Fatalf("%s: capo_agent_del_decisions_total{outcome=%s} = %v", tc.container, tc.outcome, got)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
