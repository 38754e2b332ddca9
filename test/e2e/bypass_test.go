package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/testbed"
)

// Teardowns that go around capo-ipam (the runtime read Calico's conflist
// while calico-node had just rewritten it, or while the agent was away and
// could not put capo back) are found from the ADD records and reserved
// after the fact; a non-selected pod's record is only cleared.
func TestTeardownsAroundCapoAreReservedAfterTheFact(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{OptIn: true})
		conflist := env.Conflist(testbed.Capo)
		redis := env.AddPods("redis", 3, conflist, testbed.StatefulPod("redis"))
		web := env.AddPods("web", 1, conflist)[0]
		plainDel := func(sb *testbed.Sandbox) {
			t.Helper()
			// The runtime read Calico's own conflist: calico-ipam directly.
			if err := sb.DelWith(ctx, env.Conflist(testbed.PlainCalico)); err != nil {
				t.Fatal(err)
			}
			if env.Allocated(sb.IPs[0]) {
				t.Fatalf("%s still allocated after calico-ipam's DEL", sb.IP())
			}
		}
		records := func() int {
			rs, err := journal.Dir{Root: env.StateDir()}.AddrRecords()
			if err != nil {
				t.Fatal(err)
			}
			return len(rs)
		}
		if n := records(); n != 4 {
			t.Fatalf("%d ADD records, want 4", n)
		}
		// An ordinary teardown through capo-ipam: reserved at once, and no
		// sweep may count it as one that went around.
		env.Evict(redis[2].Pod.Name)
		if err := redis[2].Del(ctx); err != nil || !held(env, redis[2].IP()) {
			t.Fatalf("the ordinary DEL: %v, held %v", err, held(env, redis[2].IP()))
		}

		// An evicted pod and a deleted one whose DELs went around capo: the
		// periodic sweep, which checks the records of pods no longer running.
		env.Evict(redis[0].Pod.Name)
		plainDel(redis[0])
		env.DeletePod(web.Pod.Name, 0)
		plainDel(web)
		eventually(t, 10*time.Second, redis[0].IP()+" reserved after the fact", func() bool {
			r, ok := env.Reservations()[redis[0].IP()]
			return ok && r.Reason == reserve.ReasonCNIDel && r.Pod == redis[0].Pod.Name
		})
		env.Agent.WaitMetric(1, "capo_agent_bypassed_teardowns_total")
		eventually(t, 10*time.Second, "both records settled", func() bool { return records() == 1 })
		if held(env, web.IP()) {
			t.Fatal("a non-selected pod's address was reserved")
		}
		if n := env.Agent.Metric("capo_agent_bypassed_teardowns_total"); n != 1 {
			t.Fatalf("%v teardowns counted as bypassing capo, want 1", n)
		}

		// A sandbox re-created under a running pod while the agent was
		// away: the sweep at start checks every record.
		env.Agent.Stop()
		plainDel(redis[1])
		env.Agent = env.StartAgent()
		eventually(t, 10*time.Second, redis[1].IP()+" reserved at the agent's start", func() bool { return held(env, redis[1].IP()) })
		eventually(t, 10*time.Second, "no records left", func() bool { return records() == 0 })
	})
}
