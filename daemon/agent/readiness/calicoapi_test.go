package readiness

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/apigroup/apigrouptest"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
)

// A Calico type that is not served keeps the agent not ready, naming the
// group, even after a write lands (one in a group Calico does not read
// proves nothing), and refuses reservation writes until a check passes.
func TestAgentRefusesWhereCalicoTypesAreNotServed(t *testing.T) {
	apigrouptest.ServeV1(t, fake.NewClientset())
	bare := fake.NewClientset() // serves no Calico type
	r := New(nil, time.Now)
	g := NewGate(bare.Discovery(), nil, nil)
	r.gate = g
	objs := reservetest.NewObjects()
	p := &Prober{objs: objs, bucket: 0, r: r, every: probeEvery, retry: probeRetry, timeout: probeEvery, gate: g}
	p.once(context.Background())
	ok, reason, detail := r.state()
	if ok || reason != reasonCalicoAPI || !strings.Contains(detail, "not served in API group crd.projectcalico.org/v1: ipreservations") {
		t.Fatalf("state %v %q %q", ok, reason, detail)
	}
	r.landed()
	r.Serve()
	if ok, _, _ := r.state(); ok {
		t.Fatal("a landed write made an agent ready whose Calico types are not served")
	}
	s := g.Store(watchedStore{Store: nil, r: r})
	if _, err := s.Reserve(context.Background(), "n1", []reserve.Entry{{}}); err == nil || !strings.Contains(err.Error(), "not served") {
		t.Fatalf("reserve went through: %v", err)
	}

	apigrouptest.ServeV1(t, bare) // the CRDs are installed
	p.once(context.Background())
	if ok, reason, detail := r.state(); !ok {
		t.Fatalf("still not ready once served: %q %q", reason, detail)
	}
}

// Calico's group switched on the node while the agent runs: calico-ipam
// reads the conflist on every call, so the agent must stop writing where
// Calico no longer reads.
func TestAgentRefusesWhenTheNodesGroupChanges(t *testing.T) {
	kube := fake.NewClientset()
	apigrouptest.ServeV1(t, kube)
	nc := ""
	r := New(nil, time.Now)
	g := NewGate(kube.Discovery(), func() string { return nc }, nil)
	r.gate = g
	p := &Prober{objs: reservetest.NewObjects(), r: r, every: probeEvery, retry: probeRetry, timeout: probeEvery, gate: g}
	p.once(context.Background())
	r.Serve()
	if ok, reason, detail := r.state(); !ok {
		t.Fatalf("not ready in v1: %s %s", reason, detail)
	}
	nc = apigroup.GroupV3
	p.once(context.Background())
	ok, reason, detail := r.state()
	if ok || reason != reasonCalicoAPI || !strings.Contains(detail, "calico_api_group on this node is projectcalico.org/v3") {
		t.Fatalf("state %v %q %q", ok, reason, detail)
	}
}
