package nativev3

import (
	"context"
	"errors"
	"net"
	"testing"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/pkg/calico/client"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/testbed"
)

// The agent in native v3 mode, with a v3-mode calico-ipam: an evicted
// member's teardown reserves its address in projectcalico.org/v3, where
// calico-ipam reads it; calico-ipam releases the allocation, and the next
// pod of a full pool gets no address rather than the member's.
func TestV3AgentReservesWhereCalicoReads(t *testing.T) {
	testbed.SkipWithoutCalicoFromEnv(t)
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, OptIn: true, CalicoRelease: testbed.CalicoFromEnv})
	env.Agent.WaitMetric(1, "capo_calico_api_info", `group="projectcalico.org/v3"`)
	conflist := env.Conflist(testbed.Capo)
	sbs := env.AddPods("redis", 8, conflist, testbed.StatefulPod("redis"))
	victim := sbs[3]
	env.Evict(victim.Pod.Name)
	if err := victim.Del(ctx); err != nil {
		t.Fatalf("DEL of the evicted member's sandbox: %v", err)
	}

	objs, err := client.New(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	held, err := calicostore.NewOn(objs, reserve.DefaultLimits).ListNode(ctx, env.Node)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0].IP != victim.IP() || held[0].Pod != victim.Pod.Name {
		t.Fatalf("v3 reservations %+v, want %s of %s", held, victim.IP(), victim.Pod.Name)
	}
	cs, err := kubernetes.NewForConfig(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = client.NewIPAM(cs.CoreV1().RESTClient()).GetAssignmentAttributes(ctx, cnet.IP{IP: net.ParseIP(victim.IP())})
	if !errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		t.Fatalf("%s after the reserved DEL: %v, want released by calico-ipam", victim.IP(), err)
	}
	next := env.NewSandbox(env.CreatePod("redis-8", testbed.StatefulPod("redis")), conflist)
	if err := next.Add(ctx); err == nil {
		t.Fatalf("the new pod got %s; the only free address was the evicted member's %s, which must be reserved", next.IP(), victim.IP())
	}
	env.Agent.WaitMetric(1, "capo_agent_del_decisions_total", `outcome="reserved"`, `path="socket"`)
}
