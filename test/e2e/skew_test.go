package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// The previous release's capo-ipam against this agent, and this capo-ipam
// against the previous release's agent, as a node runs them for a moment
// in an upgrade or a rollback: both built from the previous release's
// commit (cached). Each way, a live teardown is reserved before the
// release, a teardown while the agent is away is journaled and replayed
// by the agent that comes back, and a sandbox added by one release's
// capo-ipam and torn down by the other's (the host's binary replaced in
// between) is reserved from its ADD record. And a reservation written by
// either release's agent is read by the other's, which gives the address
// back to the returning pod (an upgrade, then a rollback).
func TestWireSkewBetweenReleases(t *testing.T) {
	prev, err := testbed.BuildPrevious(t.Logf)
	testbed.SkipWithoutPrevious(t, err)
	t.Run("previous capo-ipam, this agent", func(t *testing.T) {
		env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true})
		env.UseCurrent()
		current := env.BinDir
		env.UsePrevious(prev)
		skew(t, env, current, func() *testbed.Agent { return env.StartAgent() }, func() {
			// The previous capo-ipam spoke wire v1, without the header.
			if v := env.Agent.Metric("capo_agent_wire_requests_total", `version="1"`, `result="answered"`); v < 1 {
				t.Fatalf("the agent answered %v requests of wire v1", v)
			}
		})
	})
	t.Run("this capo-ipam, previous agent", func(t *testing.T) {
		env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true, NoAgent: true})
		previous := func() *testbed.Agent { return env.StartAgentWith(testbed.AgentOptions{Binary: prev.CapoAgent}) }
		env.Agent = previous()
		env.UsePrevious(prev)
		older := env.BinDir
		env.UseCurrent()
		skew(t, env, older, previous, func() {
			if v := env.Agent.Metric("capo_build_info", `version="`+testbed.PreviousRelease+`"`); v != 1 {
				t.Fatalf("the agent is not %s's", testbed.PreviousRelease)
			}
		})
	})
	t.Run("reservations written by one release, returned by the other", func(t *testing.T) {
		env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true, NoAgent: true})
		b := &returnBed{t: t, env: env, conflist: env.Conflist(testbed.Capo)}
		kafka := testbed.StatefulPod("kafka")
		previous := func() *testbed.Agent { return env.StartAgentWith(testbed.AgentOptions{Binary: prev.CapoAgent}) }
		current := func() *testbed.Agent { return env.StartAgent() }
		for i, agents := range [][2]func() *testbed.Agent{{previous, current}, {current, previous}} {
			name := fmt.Sprintf("kafka-%d", i)
			env.Agent = agents[0]()
			old := b.add(name, kafka)
			b.teardown(old)
			env.Agent.Stop()
			env.Agent = agents[1]() // an upgrade, then a rollback
			back := b.comeBack(name, kafka)
			if !same(back.IPs, old.IPs) {
				t.Fatalf("%s came back with %v, want its own %v, held by the other release", name, back.IPs, old.IPs)
			}
			b.held(old.IPs, false)
			env.Agent.Stop()
		}
	})
}

// skew runs the three teardowns with the env's capo-ipam and agent;
// otherBinDir holds the other release's capo-ipam, which adds the third
// sandbox; start starts the env's agent again; live checks the agent
// after the live teardowns.
func skew(t *testing.T, env *testbed.Env, otherBinDir string, start func() *testbed.Agent, live func()) {
	ctx := context.Background()
	conflist := env.Conflist(testbed.Capo)
	sbs := env.AddPods("kafka", 2, conflist, testbed.StatefulPod("kafka"))
	crossed := env.NewSandbox(env.CreatePod("kafka-2", testbed.StatefulPod("kafka")), conflist)
	crossed.UseBinDir(otherBinDir)
	if err := crossed.Add(ctx); err != nil {
		t.Fatal(err)
	}
	crossed.UseBinDir(env.BinDir)
	held := func(sb *testbed.Sandbox) error {
		r, ok := env.Reservations()[sb.IP()]
		if !ok || r.PodUID != string(sb.Pod.UID) {
			return fmt.Errorf("%s of %s not reserved for it: %+v", sb.IP(), sb.Pod.Name, r)
		}
		if env.Allocated(sb.IPs[0]) {
			return fmt.Errorf("%s of %s still allocated", sb.IP(), sb.Pod.Name)
		}
		return nil
	}

	for _, sb := range []*testbed.Sandbox{sbs[0], crossed} {
		if err := sb.Del(ctx); err != nil {
			t.Fatalf("DEL of %s: %v", sb.Pod.Name, err)
		}
		if err := held(sb); err != nil {
			t.Fatal(err)
		}
	}

	live()
	env.Agent.Stop()
	if err := sbs[1].Del(ctx); err != nil {
		t.Fatalf("DEL with the agent away: %v", err)
	}
	if p, err := env.Journal().Pending(); err != nil || len(p) != 1 || !env.Allocated(sbs[1].IPs[0]) {
		t.Fatalf("not journaled with the address kept: %d records, %v", len(p), err)
	}
	env.Agent = start()
	var last error
	testbed.Eventually(t, 30*time.Second, "the journal replayed: reserved, then released", func() bool {
		p, err := env.Journal().Pending()
		if last = err; err == nil && len(p) > 0 {
			last = fmt.Errorf("%d records pending: %v", len(p), p[0].Err)
		}
		if last == nil {
			last = held(sbs[1])
		}
		return last == nil
	})
}
