package e2e

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/capo-net/capo/daemon/controller"
	"github.com/capo-net/capo/test/testbed"
)

// Calico's own IPAM garbage collector frees an allocation whose pod is
// Failed/Evicted once its leak grace period has passed. While the agent is
// away capo-ipam journals the eviction's DEL and keeps the address
// allocated, so a long enough outage used to hand the evicted pod's address
// to the next pod. capo-controller covers a node whose agent is not ready:
// it reserves from the pod's status before the GC runs, and the agent's
// later replay finds the address held.
func TestAgentAwayLongerThanCalicosLeakGrace(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		gc := bed.StartKubeControllers(t, ds, 4*time.Second)
		defer gc.Stop()

		// Control: no capo-controller running, the real GC frees the
		// journaled eviction's address and the next pod takes it.
		plain := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 29, OptIn: true})
		victim, next := evictWhileAgentAway(t, plain, nil)
		if next != victim.IP() {
			t.Fatalf("control: without capo-controller the new pod got %q, expected the GC to have freed %s for it", next, victim.IP())
		}

		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 29, OptIn: true})
		env.SetConfig(configWith(""))
		c := env.StartController("c1")
		eventually(t, 15*time.Second, "the controller leads", c.Leading)
		victim, next = evictWhileAgentAway(t, env, c)
		if next != "" {
			t.Fatalf("the new pod got %s: the evicted pod's %s was freed by Calico's GC without a reservation", next, victim.IP())
		}
		r, ok := env.Reservations()[victim.IP()]
		if !ok || r.Reason != controller.ReasonAgentAway || r.Pod != victim.Pod.Name || r.OwnerName != "redis" {
			t.Fatalf("reservation %+v (held %v)", r, ok)
		}
		// The agent comes back and replays the journaled DEL: the address
		// is found held, the release is a no-op, the journal empties.
		env.Agent = env.StartAgent()
		env.Agent.WaitMetric(0, "capo_agent_journal_depth")
		if again, ok := env.Reservations()[victim.IP()]; !ok || again.ReservedAt != r.ReservedAt {
			t.Fatalf("after the replay: %+v (held %v), want %+v", again, ok, r)
		}
		if env.Allocated(net.ParseIP(victim.IP())) {
			t.Fatal("the address is allocated again")
		}
	})
}

// evictWhileAgentAway fills a /29 with StatefulSet pods, stops the agent,
// has the kubelet evict one (status Failed/Evicted, then its DEL, which
// capo-ipam journals), waits until Calico's GC has judged the allocation,
// and starts one more pod. It returns the victim and the new pod's address.
func evictWhileAgentAway(t *testing.T, env *testbed.Env, c *testbed.Controller) (*testbed.Sandbox, string) {
	t.Helper()
	ctx := context.Background()
	conflist := env.Conflist(testbed.Capo)
	sbs := env.AddPods("redis", 8, conflist, testbed.OwnedBy(env.CreateStatefulSet("redis", 8)))
	victim := sbs[3]
	env.MarkRunning(victim)
	env.Agent.Stop()
	if c != nil {
		c.WaitMetricAtLeast(1, "capo_controller_agents_not_ready") // other envs' nodes in the bed count too
	}
	env.Evict(victim.Pod.Name)
	if err := victim.Del(ctx); err != nil {
		t.Fatalf("DEL with the agent away must succeed (journaled): %v", err)
	}
	if pending, _ := env.Journal().Pending(); len(pending) != 1 {
		t.Fatalf("%d journaled DELs, want 1", len(pending))
	}
	if c != nil {
		eventually(t, 15*time.Second, victim.IP()+" reserved by the controller", func() bool { return held(env, victim.IP()) })
	}
	// The GC frees an evicted pod's allocation after its grace period.
	eventually(t, calicoGCWait, "Calico's GC freeing "+victim.IP(), func() bool { return !env.Allocated(net.ParseIP(victim.IP())) })
	next := env.NewSandbox(env.CreatePod("redis-new"), conflist)
	if err := next.Add(ctx); err != nil {
		return victim, ""
	}
	return victim, next.IP()
}
