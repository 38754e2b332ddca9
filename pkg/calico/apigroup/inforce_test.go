package apigroup

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestDecideOnceKeepsTheFirstAnswer(t *testing.T) {
	t.Setenv(EnvGroup, "")
	inForceMu.Lock()
	inForce = nil
	inForceMu.Unlock()
	disc := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: GroupV3, APIResources: []metav1.APIResource{{Name: "ipreservations"}}},
	}}}
	m, err := DecideOnce(context.Background(), false, "", disc)
	if err != nil || m != (Mode{GroupV3, SourceDiscovery}) {
		t.Fatalf("first: %+v %v", m, err)
	}
	t.Setenv(EnvGroup, GroupV1) // too late: the process already decided
	if m, _ := DecideOnce(context.Background(), false, "", disc); m.Group != GroupV3 {
		t.Fatalf("second decision changed the group: %+v", m)
	}
	want := `
# HELP capo_calico_api_info 1, labelled with the API group capo reads and writes Calico's resources in (none on etcdv3) and where that choice came from (env, netconf, discovery, etcdv3).
# TYPE capo_calico_api_info gauge
capo_calico_api_info{group="projectcalico.org/v3",source="discovery"} 1
`
	if err := testutil.CollectAndCompare(Info(), strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	err = Usable(disc.ServerResourcesForGroupVersion, m, "")
	if !IsNotServed(err) || !strings.Contains(err.Error(), "projectcalico.org/v3: ipamblocks, ipamhandles") {
		t.Fatalf("check: %v", err)
	}
}
