package e2e

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// A reservation an operator ends by hand stays ended for that teardown.
// While the node's agent is away a member is deleted: it terminates, its
// DEL is journaled (the address stays allocated), and capo-controller
// reserves it; the operator releases it with capoctl. Neither the
// controller, seeing the terminating pod deleted next, nor the agent,
// replaying the journaled DEL when it is back, reserves it again: the
// replay frees the address, as the operator asked.
func TestReleaseByHandSticks(t *testing.T) {
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, OptIn: true})
	env.SetConfig(configWith("ipReserveTime: 1h\n"))
	c := env.StartController("c1")
	eventually(t, 15*time.Second, "the controller leads", c.Leading)
	sbs := env.AddPods("redis", 2, env.Conflist(testbed.Capo), testbed.OwnedBy(env.CreateStatefulSet("redis", 2)))
	victim, ip := sbs[0], sbs[0].IP()
	env.MarkRunning(victim)
	env.Agent.Stop()
	c.WaitMetricAtLeast(1, "capo_controller_agents_not_ready") // other envs' nodes in the bed count too

	env.DeletePod(victim.Pod.Name, 30) // no kubelet here: it stays terminating
	if err := victim.Del(ctx); err != nil {
		t.Fatalf("DEL with the agent away must succeed (journaled): %v", err)
	}
	eventually(t, 15*time.Second, ip+" reserved by the controller", func() bool { return held(env, ip) })
	if out, code := capoctl(t, env, "", "release", ip, "--yes"); code != 0 || !strings.Contains(out, "released 1") {
		t.Fatalf("capoctl release: exit %d\n%s", code, out)
	}

	env.DeletePod(victim.Pod.Name, 0) // the terminating pod deleted
	time.Sleep(3 * time.Second)       // the controller covers a deleted pod at once, and passes every second
	if held(env, ip) {
		t.Fatalf("%s reserved again by the controller after the operator released it", ip)
	}
	if !env.Allocated(net.ParseIP(ip)) {
		t.Fatalf("%s freed before the journaled DEL was replayed", ip)
	}

	env.Agent = env.StartAgent()
	env.Agent.WaitMetric(0, "capo_agent_journal_depth")
	if held(env, ip) || env.Allocated(net.ParseIP(ip)) {
		t.Fatalf("after the replay %s is held %v, allocated %v; want free, as released by hand", ip, held(env, ip), env.Allocated(net.ParseIP(ip)))
	}
	if got := c.Metric("capo_controller_releases_total"); got != 0 {
		t.Fatalf("the controller released %v reservations: the operator's release was capoctl's", got)
	}
}

// An agent's hold while calico-node is replaced is no teardown's: an
// operator who releases it by hand (capoctl release of a member's address
// while the member runs with it) releases the hold, not the member's next
// teardown. The member's DEL then reserves its address as any selected
// pod's teardown does, and the address is not freed.
func TestReleaseByHandOfAHoldLeavesTheTeardown(t *testing.T) {
	ctx := context.Background()
	env, n, _ := calicoNodeBed(t)
	member := env.NewDiskSandbox(env.CreatePod("db-0", testbed.StatefulPod("db")), n)
	if err := member.Add(ctx); err != nil {
		t.Fatal(err)
	}
	env.MarkRunning(member)
	ip := member.IP()

	env.DeletePod("calico-node-a", 30) // the DaemonSet replaces it: the agent holds db-0's address
	eventually(t, 10*time.Second, ip+" held", func() bool { return held(env, ip) })
	if out, code := capoctl(t, env, "", "release", ip, "--yes"); code != 0 || !strings.Contains(out, "released 1") {
		t.Fatalf("capoctl release: exit %d\n%s", code, out)
	}
	if err := member.Del(ctx); err != nil { // capo still in the chain
		t.Fatal(err)
	}
	if !held(env, ip) {
		t.Fatalf("db-0's teardown reserved nothing: the release of its hold stood for it, and %s is free (allocated %v)", ip, env.Allocated(net.ParseIP(ip)))
	}
}
