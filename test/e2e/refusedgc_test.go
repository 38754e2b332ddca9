package e2e

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/capo-net/capo/daemon/controller"
	"github.com/capo-net/capo/test/testbed"
)

// The agent's reservation writes are refused, and Calico's GC is faster
// than the kubelet: the leak grace (5 s) is shorter than the readiness
// probe's failures (the chart's 5 s x 3), so an evicted member's journaled
// allocation is freed before the agent's pod turns NotReady and the
// controller covers its node. The controller must still reserve the free
// address: it used to skip an agent-away teardown no longer allocated
// ("the agent already through"), and the next pod got the member's address.
func TestAgentWritesRefusedAndCalicosGCFirst(t *testing.T) {
	ctx := context.Background()
	// The probe's threshold is reached when the test says (ReportNotReady),
	// after the GC: the order the kubelet's timing gives, made certain.
	r := refusedWrites(t, testbed.AgentOptions{ReadinessLag: time.Hour})
	env, sbs, victim, conflist := r.env, r.sbs, r.victim, r.conflist
	ip := net.ParseIP(victim.IP())
	eventually(t, calicoGCWait, "Calico's GC freeing "+victim.IP(), func() bool { return !env.Allocated(ip) })
	if held(env, victim.IP()) {
		t.Fatalf("%s reserved before the agent's pod turned NotReady: the GC was not first, and this test proves nothing", victim.IP())
	}
	env.Agent.ReportNotReady() // the probe's third failure

	eventually(t, 20*time.Second, victim.IP()+" reserved by the controller", func() bool { return held(env, victim.IP()) })
	e := env.Reservations()[victim.IP()]
	if e.Reason != controller.ReasonAgentAway || e.Pod != victim.Pod.Name || e.OwnerName != "redis" {
		t.Fatalf("reservation %+v", e)
	}
	// Calico's datastore: no member's address free and unreserved.
	reservations := env.Reservations()
	for _, sb := range sbs {
		if _, ok := reservations[sb.IP()]; !ok && !env.Allocated(net.ParseIP(sb.IP())) {
			t.Errorf("%s (%s) is free and unreserved", sb.IP(), sb.Pod.Name)
		}
	}
	next := env.NewSandbox(env.CreatePod("redis-new"), conflist)
	if err := next.Add(ctx); err == nil && next.IP() == victim.IP() {
		t.Fatalf("the next pod got the evicted member's %s", victim.IP())
	}
}
