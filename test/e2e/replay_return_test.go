package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// A member torn down while its agent is away, and deleted before the agent
// is back, is reserved from the journal on what capo-ipam recorded at ADD
// (its pod object is gone): the StatefulSet it belonged to is kept, so the
// member's next pod gets its address back.
func TestReplayedTeardownStillReturns(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 28, OptIn: true})
		conflist := env.Conflist(testbed.Capo)
		member := testbed.StatefulPod("zk")
		old := env.AddPods("zk", 3, conflist, member)[1]
		env.Agent.Stop()
		if err := old.Del(ctx); err != nil {
			t.Fatalf("DEL with the agent away: %v", err)
		}
		env.DeletePod(old.Pod.Name, 0)
		env.Agent = env.StartAgent()
		eventually(t, 20*time.Second, "the agent replays the journaled DEL", func() bool { return !env.Allocated(old.IPs[0]) })
		e, held := env.Reservations()[old.IP()]
		if !held || e.OwnerUID == "" || e.OwnerKind != "StatefulSet" {
			t.Fatalf("replayed reservation %+v (held %v): the member's StatefulSet is lost", e, held)
		}
		back := env.NewSandbox(env.CreatePod(old.Pod.Name, member), conflist)
		if err := back.Add(ctx); err != nil {
			t.Fatal(err)
		}
		if !same(back.IPs, old.IPs) {
			t.Fatalf("the member came back with %v, want its own %v", back.IPs, old.IPs)
		}
	})
}

// A member started and torn down while its agent was away has no ADD
// record of its StatefulSet, and its pod object is gone by the replay: the
// member that now has its name tells the set, whose reservation time and
// returns then apply.
func TestTeardownJournaledAtBothEndsTakesItsSetFromTheNextMember(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 28, OptIn: true})
		conflist := env.Conflist(testbed.Capo)
		member := testbed.StatefulPod("kafka")
		env.Agent.Stop()
		old := env.AddPods("kafka", 1, conflist, member)[0]
		if err := old.Del(ctx); err != nil {
			t.Fatalf("DEL with the agent away: %v", err)
		}
		env.DeletePod(old.Pod.Name, 0)
		next := env.CreatePod(old.Pod.Name, member)
		env.Agent = env.StartAgent()
		eventually(t, 20*time.Second, "the agent replays the journaled DEL", func() bool { _, held := env.Reservations()[old.IP()]; return held })
		e := env.Reservations()[old.IP()]
		if e.OwnerKind != "StatefulSet" || e.OwnerName != "kafka" || e.PodUID != string(old.Pod.UID) {
			t.Fatalf("replayed reservation %+v: want StatefulSet kafka and the torn-down pod's UID %s", e, old.Pod.UID)
		}
		back := env.NewSandbox(next, conflist)
		if err := back.Add(ctx); err != nil {
			t.Fatal(err)
		}
		if !same(back.IPs, old.IPs) {
			t.Fatalf("the member came back with %v, want its own %v", back.IPs, old.IPs)
		}
	})
}
