package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/apigroup/apigrouptest"
	"github.com/capo-net/capo/pkg/calico/gate"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/wire"
)

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
	apigrouptest.ServeV1(t, fake.NewClientset()) // the process decided v1, by discovery
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
