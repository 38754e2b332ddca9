package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/gate"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
	"github.com/capo-net/capo/pkg/wire"
)

// serveCalicoV1 makes kube's discovery serve Calico's v1 types and has the
// test process decide the group (v1) if it has not yet.
func serveCalicoV1(t *testing.T, kube *fake.Clientset) {
	t.Helper()
	rl := &metav1.APIResourceList{GroupVersion: apigroup.GroupV1}
	for _, k := range apigroup.All {
		rl.APIResources = append(rl.APIResources, metav1.APIResource{Name: k.V1})
	}
	kube.Resources = append(kube.Resources, rl)
	if m, err := apigroup.DecideOnce(context.Background(), false, "", kube.Discovery()); err != nil || m.Group != apigroup.GroupV1 {
		t.Fatalf("deciding the group: %+v %v", m, err)
	}
}

// A Calico type that is not served keeps the agent not ready, naming the
// group, even after a write lands (one in a group Calico does not read
// proves nothing), and refuses reservation writes until a check passes.
func TestAgentRefusesWhereCalicoTypesAreNotServed(t *testing.T) {
	serveCalicoV1(t, fake.NewClientset())
	bare := fake.NewClientset() // serves no Calico type
	r := newReadiness(nil, time.Now)
	g := newGate(bare.Discovery(), nil, nil)
	r.gate = g
	objs := reservetest.NewObjects()
	p := &prober{objs: objs, bucket: 0, r: r, every: probeEvery, retry: probeRetry, timeout: probeEvery, gate: g}
	p.once(context.Background())
	ok, reason, detail := r.state()
	if ok || reason != reasonCalicoAPI || !strings.Contains(detail, "not served in API group crd.projectcalico.org/v1: ipreservations") {
		t.Fatalf("state %v %q %q", ok, reason, detail)
	}
	r.landed()
	r.serve()
	if ok, _, _ := r.state(); ok {
		t.Fatal("a landed write made an agent ready whose Calico types are not served")
	}
	s := g.Store(watchedStore{Store: nil, r: r})
	if _, err := s.Reserve(context.Background(), "n1", []reserve.Entry{{}}); err == nil || !strings.Contains(err.Error(), "not served") {
		t.Fatalf("reserve went through: %v", err)
	}

	serveCalicoV1(t, bare) // the CRDs are installed
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
	serveCalicoV1(t, kube)
	nc := ""
	r := newReadiness(nil, time.Now)
	g := newGate(kube.Discovery(), func() string { return nc }, nil)
	r.gate = g
	p := &prober{objs: reservetest.NewObjects(), r: r, every: probeEvery, retry: probeRetry, timeout: probeEvery, gate: g}
	p.once(context.Background())
	r.serve()
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

type someIPs struct{}

func (someIPs) IPsByHandle(context.Context, string) ([]cnet.IP, error) { return nil, nil }
func (someIPs) GetAssignmentAttributes(context.Context, cnet.IP) (map[string]string, *string, error) {
	return nil, nil, nil
}

// While the group cannot be used, "no addresses" is never the answer: the
// DEL is journaled and the address stays allocated.
func TestIPAMReadsRefuseWhileTheGroupCannotBeUsed(t *testing.T) {
	var problem error = &apigroup.NotServedError{Group: apigroup.GroupV1, Missing: []string{"ipamhandles"}}
	gt := gate.NewFunc(func(context.Context) error { return problem }, time.Hour)
	_ = gt.Once(context.Background())
	g := gt.IPAM(someIPs{})
	if _, err := g.IPsByHandle(context.Background(), "k8s-pod-network.c1"); !apigroup.IsNotServed(err) {
		t.Fatalf("handle read: %v", err)
	}
	if _, _, err := g.GetAssignmentAttributes(context.Background(), cnet.IP{}); !apigroup.IsNotServed(err) {
		t.Fatalf("holder read: %v", err)
	}
	problem = nil
	_ = gt.Once(context.Background())
	if _, err := g.IPsByHandle(context.Background(), "k8s-pod-network.c1"); err != nil {
		t.Fatal(err)
	}
}

// A capo-ipam call in another Calico API group than the agent's is
// refused (capo-ipam journals it and keeps the address), as is its replay
// by an agent that decided its group by discovery alone.
func TestSocketRefusesACallInAnotherGroup(t *testing.T) {
	serveCalicoV1(t, fake.NewClientset()) // the process decided v1, by discovery
	sv := &server{}
	ctx := context.Background()
	for group, refused := range map[string]bool{"": false, apigroup.GroupV1: false, "crd.projectcalico.org": false, apigroup.GroupV3: true} {
		err := sv.callGroup(ctx, group)
		if refused != (err != nil) || refused && !strings.Contains(err.Error(), "journaled with its address kept") {
			t.Errorf("a call in %q: %v", group, err)
		}
		rec := &journal.Record{Request: wire.ReserveRequest{CalicoAPIGroup: group}}
		if err := replayGroup(rec); refused != (err != nil) {
			t.Errorf("a replay of a call in %q: %v", group, err)
		}
	}
}
