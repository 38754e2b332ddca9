package agent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	libapiv3 "github.com/projectcalico/calico/libcalico-go/lib/apis/v3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
	"github.com/capo-net/capo/pkg/returns"
	"github.com/capo-net/capo/pkg/wire"
)

// fakeNodes answers Node reads: present ones by name, err for all if set.
type fakeNodes struct {
	nodes map[string]*corev1.Node
	err   error
	reads int
}

func (f *fakeNodes) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Node, error) {
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	if n, ok := f.nodes[name]; ok {
		return n, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
}

// The agent names the predecessor to free only when Kubernetes has
// declared its node lost, and reads that Node only when the rest allows.
func TestPredecessorOnlyOnALostNode(t *testing.T) {
	ctx := context.Background()
	_, pod := returnsHolding(t, reservetest.NewStore(reserve.DefaultLimits))
	pod.UID = "pod-new"
	e := reserve.Entry{IP: "10.0.0.3", Node: "n2", Namespace: "ns", Pod: "redis-3", PodUID: "pod-2"}
	pred := &calico.Holder{Handle: "k8s-pod-network.0ld", Namespace: "ns", Pod: "redis-3", Node: "n2"}
	tainted := func(key string) *corev1.Node {
		return &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: key, Effect: corev1.TaintEffectNoExecute}}}}
	}
	cases := []struct {
		name   string
		nodes  *fakeNodes
		holder *calico.Holder
		want   returns.Lost // "" = nothing freed
		reads  int
	}{
		{"Node gone", &fakeNodes{}, pred, returns.NodeGone, 1},
		{"unreachable: maybe only partitioned", &fakeNodes{nodes: map[string]*corev1.Node{"n2": tainted(corev1.TaintNodeUnreachable)}}, pred, "", 1},
		{"out of service", &fakeNodes{nodes: map[string]*corev1.Node{"n2": tainted(corev1.TaintNodeOutOfService)}}, pred, returns.NodeOutOfService, 1},
		{"NotReady, kubelet reporting", &fakeNodes{nodes: map[string]*corev1.Node{"n2": tainted(corev1.TaintNodeNotReady)}}, pred, "", 1},
		{"Node unreadable", &fakeNodes{err: errors.New("timeout")}, pred, "", 1},
		{"another pod's allocation", &fakeNodes{}, &calico.Holder{Handle: "k8s-pod-network.0ld", Namespace: "ns", Pod: "web-1", Node: "n2"}, "", 0},
		{"free", &fakeNodes{}, nil, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &offerer{node: "n1", nodes: tc.nodes}
			got := r.predecessor(ctx, config.ReturnAnyNode, pod, e, tc.holder, "k8s-pod-network")
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("freeing %+v", got)
			case tc.want != "" && (got == nil || got.Lost != tc.want || got.ContainerID != "0ld"):
				t.Fatalf("%+v, want sandbox 0ld freed, node %s", got, tc.want)
			}
			if tc.nodes.reads != tc.reads {
				t.Errorf("%d Node reads, want %d", tc.nodes.reads, tc.reads)
			}
		})
	}
}

// fakeCalicoNodes answers Calico node reads: each names its Kubernetes
// Node in its orchRefs ("" for none); missing ones do not exist.
type fakeCalicoNodes map[string]string

func (f fakeCalicoNodes) Get(_ context.Context, name string, _ options.GetOptions) (*libapiv3.Node, error) {
	k, ok := f[name]
	if !ok {
		return nil, cerrors.ErrorResourceDoesNotExist{Identifier: name}
	}
	n := libapiv3.NewNode()
	n.Name = name
	if k != "" {
		n.Spec.OrchRefs = []libapiv3.OrchRef{{Orchestrator: "k8s", NodeName: k}}
	}
	return n, nil
}

// On etcdv3 a Calico node may be named otherwise than its Kubernetes Node:
// the Node is read by the name Calico's orchRefs give, so a live node does
// not look gone. A Calico node that does not exist is gone only if no
// Kubernetes Node has its name; one that names no Kubernetes Node is
// nobody's to declare lost.
func TestPredecessorsNodeByItsKubernetesName(t *testing.T) {
	ctx := context.Background()
	_, pod := returnsHolding(t, reservetest.NewStore(reserve.DefaultLimits))
	pod.UID = "pod-new"
	e := reserve.Entry{IP: "10.0.0.3", Node: "n2.example.com", Namespace: "ns", Pod: "redis-3", PodUID: "pod-2"}
	pred := &calico.Holder{Handle: "k8s-pod-network.0ld", Namespace: "ns", Pod: "redis-3", Node: "n2.example.com"}
	outOfService := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}}}}
	for _, tc := range []struct {
		name   string
		calico fakeCalicoNodes
		nodes  map[string]*corev1.Node
		want   returns.Lost
	}{
		{"live, named otherwise", fakeCalicoNodes{"n2.example.com": "n2"}, map[string]*corev1.Node{"n2": {}}, ""},
		{"out of service, named otherwise", fakeCalicoNodes{"n2.example.com": "n2"}, map[string]*corev1.Node{"n2": outOfService}, returns.NodeOutOfService},
		{"its Node deleted", fakeCalicoNodes{"n2.example.com": "n2"}, nil, returns.NodeGone},
		{"its Calico node deleted, and no Node of its name", fakeCalicoNodes{}, map[string]*corev1.Node{"n2": {}}, returns.NodeGone},
		{"its Calico node missing, the Node of its name standing", fakeCalicoNodes{}, map[string]*corev1.Node{"n2.example.com": {}}, ""},
		{"not a Kubernetes node", fakeCalicoNodes{"n2.example.com": ""}, nil, ""},
		// This agent's own node, named otherwise in Calico: never lost to
		// itself, whatever its Node says (the out-of-service taint stays
		// until an operator removes it; a Node object re-registering).
		{"this node, named otherwise, out of service", fakeCalicoNodes{"n2.example.com": "n1"}, map[string]*corev1.Node{"n1": outOfService}, ""},
		{"this node, named otherwise, its Node deleted", fakeCalicoNodes{"n2.example.com": "n1"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &offerer{node: "n1", nodes: &fakeNodes{nodes: tc.nodes}, calicoNodes: tc.calico}
			got := r.predecessor(ctx, config.ReturnAnyNode, pod, e, pred, "k8s-pod-network")
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("freeing %+v", got)
			case tc.want != "" && (got == nil || got.Lost != tc.want):
				t.Fatalf("%+v, want freed, node %s", got, tc.want)
			}
		})
	}
}

// What capo-ipam reports freed is recorded (log, metric, Event) for the
// sandboxes the offer named only.
func TestReclaimedIsRecordedForTheOfferOnly(t *testing.T) {
	store := reservetest.NewStore(reserve.DefaultLimits)
	r, pod := returnsHolding(t, store)
	rec := record.NewFakeRecorder(10)
	r.s.recorder = rec
	r.o.offers.remember(pod, []string{"10.0.0.3"}, returns.Predecessor{Handle: "k8s-pod-network.0ld", ContainerID: "0ld", Node: "n2", Lost: returns.NodeGone})
	srv := serverFor(r, &fakeCluster{pod: pod})
	body := `{"pod":{"namespace":"ns","name":"redis-3","uid":"pod-2"},"sandbox":{"network":"k8s-pod-network","containerID":"new"},"ips":["10.0.0.3"],"outcome":"fell-back","reason":"refused","reclaimed":["0ld","other"]}`
	w := httptest.NewRecorder()
	srv.handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, wire.ReturnOutcomePath, strings.NewReader(body)))
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if got := testutil.ToFloat64(r.o.metrics.returns.WithLabelValues("reclaimed", string(returns.NodeGone))); got != 1 {
		t.Fatalf("reclaimed counted %v, want 1", got)
	}
	var reclaimed []string
	for len(rec.Events) > 0 {
		if ev := <-rec.Events; strings.Contains(ev, "AddressReclaimed") {
			reclaimed = append(reclaimed, ev)
		}
	}
	if len(reclaimed) != 1 || !strings.Contains(reclaimed[0], "sandbox 0ld on node n2 (its Node object is deleted)") {
		t.Fatalf("Events %q", reclaimed)
	}
}
