package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// Calico's API group is asked once per call, by the side that makes it. A
// node whose calico plugin is told projectcalico.org/v3 in its netconf
// (calico_api_group, as after Calico's migration) while the agent learnt
// crd.projectcalico.org/v1 by discovery alone (no CALICO_API_GROUP, no
// --cni-conf-dir): the agent used to reserve in v1, where Calico no longer
// reads, and capo-ipam released the address. capo-ipam now names the
// group its call uses, and the agent refuses another: the teardown is
// journaled, its address kept, and the replay refuses too while they
// disagree.
func TestAgentRefusesACallInAnotherGroup(t *testing.T) {
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true})
	env.Agent.WaitMetric(1, "capo_calico_api_info", `group="crd.projectcalico.org/v1"`, `source="discovery"`)
	sb := env.AddPods("kafka", 1, env.Conflist(testbed.Capo), testbed.OwnedBy(env.CreateStatefulSet("kafka", 1)))[0]
	env.Evict(sb.Pod.Name)
	if err := sb.DelWith(ctx, withAPIGroup(t, env.Conflist(testbed.Capo), "projectcalico.org/v3")); err != nil {
		t.Fatalf("DEL must not block teardown: %v", err)
	}
	if !env.Allocated(sb.IPs[0]) {
		t.Fatalf("%s released on a reservation made in crd.projectcalico.org/v1 for a call in projectcalico.org/v3 (reserved: %v)", sb.IP(), held(env, sb.IP()))
	}
	if held(env, sb.IP()) {
		t.Fatalf("%s reserved in crd.projectcalico.org/v1 for a call in projectcalico.org/v3", sb.IP())
	}
	time.Sleep(3 * time.Second) // a few of the drain's passes (1 s apart in the bed)
	if pending, _ := env.Journal().Pending(); len(pending) != 1 || !env.Allocated(sb.IPs[0]) {
		t.Fatalf("the replay did not keep the teardown while the groups disagree: %d journaled, allocated %v", len(pending), env.Allocated(sb.IPs[0]))
	}
}
