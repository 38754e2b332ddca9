package e2e

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/capo-net/capo/daemon/controller"
	"github.com/capo-net/capo/test/testbed"
)

// The agent hangs (SIGSTOP) but its pod still looks Ready, as it does until
// the kubelet's readiness probe has failed a few times. Selected pods are
// deleted meanwhile: capo-ipam journals their DELs, the pods leave the
// controller's cache, and only then is the agent reported NotReady. The
// controller must cover those teardowns before Calico's GC frees the
// addresses, so that the next pods do not get them.
func TestAgentHungWhileLookingReady(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		// Longer than a DEL's wait for the agent (10 s) and the NotReady
		// report after it; short enough for the test.
		gc := bed.StartKubeControllers(t, ds, 30*time.Second)
		defer gc.Stop()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 29, OptIn: true})
		env.SetConfig(configWith(""))
		c := env.StartController("c1")
		eventually(t, 15*time.Second, "the controller leads", c.Leading)

		conflist := env.Conflist(testbed.Capo)
		sbs := env.AddPods("kafka", 8, conflist, testbed.OwnedBy(env.CreateStatefulSet("kafka", 8)))
		victims := []*testbed.Sandbox{sbs[2], sbs[5]}
		for _, v := range victims {
			env.MarkRunning(v)
		}
		env.Agent.Hang()
		deleteWhileHung(t, env, victims)
		if pending, _ := env.Journal().Pending(); len(pending) != len(victims) {
			t.Fatalf("%d journaled DELs, want %d: the hung agent answered?", len(pending), len(victims))
		}
		env.Agent.ReportNotReady()

		for _, v := range victims {
			eventually(t, calicoGCWait, "Calico's GC freeing "+v.IP(), func() bool { return !env.Allocated(net.ParseIP(v.IP())) })
		}
		held := env.Reservations()
		for _, v := range victims {
			r, ok := held[v.IP()]
			if !ok {
				t.Errorf("%s of %s is free and unreserved", v.IP(), v.Pod.Name)
				continue
			}
			if r.Reason != controller.ReasonAgentAway || r.Pod != v.Pod.Name || r.OwnerName != "kafka" {
				t.Errorf("reservation of %s: %+v", v.IP(), r)
			}
		}
		if n := c.Metric("capo_controller_recent_teardowns_covered_total", `reason="agent-away"`); n != float64(len(victims)) {
			t.Errorf("recent teardowns covered: %v, want %d", n, len(victims))
		}
		nextPodsAvoid(t, env, conflist, victims)
	})
}

// deleteWhileHung deletes the victims' pod objects and runs their DELs at
// once, as the kubelet would; every DEL must succeed (journaled).
func deleteWhileHung(t *testing.T, env *testbed.Env, victims []*testbed.Sandbox) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(victims))
	for i, v := range victims {
		env.DeletePod(v.Pod.Name, 0)
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = v.Del(context.Background()) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("DEL of %s with the agent hung failed: %v", victims[i].Pod.Name, err)
		}
	}
}

// nextPodsAvoid starts as many pods as there were victims: none may get a
// victim's address.
func nextPodsAvoid(t *testing.T, env *testbed.Env, conflist []byte, victims []*testbed.Sandbox) {
	t.Helper()
	old := map[string]string{}
	for _, v := range victims {
		old[v.IP()] = v.Pod.Name
	}
	for _, name := range []string{"next-0", "next-1"} {
		sb := env.NewSandbox(env.CreatePod(name), conflist)
		if err := sb.Add(context.Background()); err != nil {
			continue // the pool is full: the victims' addresses are held
		}
		if was, ok := old[sb.IP()]; ok {
			t.Errorf("%s got %s, the address of %s, deleted while the agent hung", name, sb.IP(), was)
		}
	}
}
