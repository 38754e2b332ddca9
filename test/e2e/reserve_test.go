package e2e

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/testbed"
)

// fillThenEvict fills a /29 pool (8 addresses) with StatefulSet pods, has
// the kubelet evict one (phase Failed, no API delete, sandbox DEL'd), and
// adds one more pod. It returns the evicted sandbox and the new pod's IP.
func fillThenEvict(t *testing.T, env *testbed.Env, conflist []byte, opts ...testbed.PodOption) (*testbed.Sandbox, string) {
	ctx := context.Background()
	if len(opts) == 0 {
		opts = []testbed.PodOption{testbed.StatefulPod("redis")}
	}
	sbs := env.AddPods("redis", 8, conflist, opts...)
	victim := sbs[3]
	env.Evict(victim.Pod.Name)
	if err := victim.Del(ctx); err != nil {
		t.Fatalf("DEL of the evicted pod's sandbox: %v", err)
	}
	next := env.NewSandbox(env.CreatePod("redis-8", opts...), conflist)
	if err := next.Add(ctx); err != nil {
		return victim, ""
	}
	return victim, next.IP()
}

func TestKubeletEvictionIsReservedWherePlainCalicoReuses(t *testing.T) {
	eachRelease(t, func(t *testing.T, ds testbed.Datastore, rel string) {
		// Plain Calico, same setup: the freed address goes to the very next pod.
		plain := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 29, NoAgent: true, CalicoRelease: rel})
		victim, next := fillThenEvict(t, plain, plain.Conflist(testbed.PlainCalico))
		if next != victim.IP() {
			t.Fatalf("control: plain calico-ipam gave the new pod %q, expected the evicted pod's %s", next, victim.IP())
		}

		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 29, OptIn: true, CalicoRelease: rel})
		victim, next = fillThenEvict(t, env, env.Conflist(testbed.Capo))
		if next != "" {
			t.Fatalf("the new pod got %s; the only free address was the evicted pod's %s, which must be reserved", next, victim.IP())
		}
		r, ok := env.Reservations()[victim.IP()]
		if !ok {
			t.Fatalf("%s not reserved; reservations %v", victim.IP(), env.Reservations())
		}
		want := reserve.Entry{
			IP: victim.IP(), Node: env.Node, Namespace: env.Namespace, Pod: victim.Pod.Name, PodUID: string(victim.Pod.UID),
			Reason: reserve.ReasonCNIDel, ReservedAt: r.ReservedAt, OwnerKind: "StatefulSet", OwnerName: "redis", OwnerUID: "uid-StatefulSet-redis",
			Sandbox: reserve.SandboxOf(victim.ContainerID),
		}
		if r != want || time.Since(r.ReservedAt) > time.Minute {
			t.Fatalf("reservation %+v\nwant %+v", r, want)
		}
		if env.Allocated(victim.IPs[0]) {
			t.Fatal("calico-ipam did not release the address after the reservation")
		}
		env.Agent.WaitMetric(1, "capo_agent_del_decisions_total", `outcome="reserved"`, `path="socket"`)
	})
}

func TestTeardownPathsReserve(t *testing.T) {
	eachRelease(t, func(t *testing.T, ds testbed.Datastore, rel string) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{OptIn: true, CalicoRelease: rel})
		conflist := env.Conflist(testbed.Capo)
		add := func(name string, opts ...testbed.PodOption) *testbed.Sandbox {
			return env.AddPods(name, 1, conflist, opts...)[0]
		}
		reserved := func(t *testing.T, sb *testbed.Sandbox) reserve.Entry {
			t.Helper()
			r, ok := env.Reservations()[sb.IP()]
			if !ok {
				t.Fatalf("%s of %s not reserved", sb.IP(), sb.Pod.Name)
			}
			if r.Pod != sb.Pod.Name || r.PodUID != string(sb.Pod.UID) {
				t.Fatalf("reservation %+v is not %s's", r, sb.Pod.Name)
			}
			return r
		}
		del := func(t *testing.T, sb *testbed.Sandbox) {
			t.Helper()
			if err := sb.Del(ctx); err != nil {
				t.Fatalf("DEL: %v", err)
			}
		}

		t.Run("api delete", func(t *testing.T) {
			sb := add("zk", testbed.StatefulPod("zk"))
			env.DeletePod(sb.Pod.Name, 30) // graceful: Terminating until the kubelet is done
			del(t, sb)
			reserved(t, sb)
		})
		t.Run("force delete before the DEL", func(t *testing.T) {
			sb := add("kafka", testbed.StatefulPod("kafka"))
			env.DeletePod(sb.Pod.Name, 0)
			time.Sleep(300 * time.Millisecond) // let the agent's watch see the delete
			del(t, sb)
			if r := reserved(t, sb); r.OwnerName != "kafka" {
				t.Fatalf("decided without the pod's real object: %+v", r)
			}
		})
		t.Run("force delete of a pod that is not selected", func(t *testing.T) {
			sb := add("web", testbed.WithLabels(map[string]string{"app": "web"}))
			env.DeletePod(sb.Pod.Name, 0)
			time.Sleep(300 * time.Millisecond)
			del(t, sb)
			if _, ok := env.Reservations()[sb.IP()]; ok || env.Allocated(sb.IPs[0]) {
				t.Fatalf("%s: remembered labels say not selected; want released, not reserved", sb.IP())
			}
		})
		t.Run("sandbox re-creation of a running pod", func(t *testing.T) {
			old := add("es", testbed.StatefulPod("es"))
			fresh := env.NewSandbox(old.Pod, conflist)
			if err := fresh.Add(ctx); err != nil {
				t.Fatal(err)
			}
			del(t, old)
			reserved(t, old)
			if _, ok := env.Reservations()[fresh.IP()]; ok || !env.Allocated(fresh.IPs[0]) {
				t.Fatalf("the running sandbox's %s was touched", fresh.IP())
			}
		})
		t.Run("DEL twice keeps the first reservation", func(t *testing.T) {
			sb := add("twice", testbed.StatefulPod("twice"))
			del(t, sb)
			first := reserved(t, sb)
			time.Sleep(1100 * time.Millisecond)
			del(t, sb)
			if again := reserved(t, sb); again != first {
				t.Fatalf("second DEL changed the reservation: %+v -> %+v", first, again)
			}
		})
		t.Run("rollback inside a failed ADD reserves nothing", func(t *testing.T) {
			// Calico assigns, builds the veth, then refuses floating IPs (the
			// feature is off) and rolls its IPAM back from inside the ADD.
			pod := env.CreatePod("rollback", testbed.StatefulPod("rollback"),
				testbed.WithAnnotations(map[string]string{"cni.projectcalico.org/floatingIPs": `["192.0.2.1"]`}))
			sb := env.NewSandbox(pod, conflist)
			before := env.Agent.Metric("capo_agent_del_decisions_total")
			nothingBefore := env.Agent.Metric("capo_agent_del_decisions_total", `outcome="nothing-to-reserve"`)
			err := sb.Add(ctx)
			if err == nil || !strings.Contains(err.Error(), "floating_ips") {
				t.Fatalf("ADD: %v; want Calico's floating_ips refusal after IPAM", err)
			}
			if !strings.Contains(env.CapoIPAMLog(), "DEL inside a failed ADD") {
				t.Fatal("capo-ipam never saw the rollback DEL; the test did not exercise it")
			}
			st, err := env.IPAMState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ips := st.ByHandle[sb.Handle()]; len(ips) != 0 {
				t.Fatalf("rolled-back ADD left %v allocated", ips)
			}
			if got := env.Agent.Metric("capo_agent_del_decisions_total"); got != before {
				t.Fatalf("the agent was asked about a rollback (%v decisions, was %v)", got, before)
			}
			// containerd then tears the failed sandbox down: nothing to reserve.
			del(t, sb)
			env.Agent.WaitMetric(nothingBefore+1, "capo_agent_del_decisions_total", `outcome="nothing-to-reserve"`)
		})
	})
}

func TestNotSelectedOrNotOptedInReleaseAsPlainCalico(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		optedIn := bed.NewEnv(t, ds, testbed.EnvOptions{OptIn: true})
		plainPod := optedIn.AddPods("web", 1, optedIn.Conflist(testbed.Capo), testbed.WithLabels(map[string]string{"app": "web"}))[0]
		optedOut := bed.NewEnv(t, ds, testbed.EnvOptions{}) // node not annotated, namespace not labelled
		statefulPod := optedOut.AddPods("redis", 1, optedOut.Conflist(testbed.Capo), testbed.StatefulPod("redis"))[0]
		for _, c := range []struct {
			env *testbed.Env
			sb  *testbed.Sandbox
		}{{optedIn, plainPod}, {optedOut, statefulPod}} {
			if err := c.sb.Del(ctx); err != nil {
				t.Fatal(err)
			}
			if len(c.env.Reservations()) != 0 || c.env.Allocated(c.sb.IPs[0]) {
				t.Fatalf("%s: want released without a reservation, got reservations %v", c.sb.Pod.Name, c.env.Reservations())
			}
		}
		optedIn.Agent.WaitMetric(1, "capo_agent_del_decisions_total", `outcome="not-selected"`)
		optedOut.Agent.WaitMetric(1, "capo_agent_del_decisions_total", `outcome="node-not-opted-in"`)
	})
}

func TestAgentDownJournalsThenReservesAndReleases(t *testing.T) {
	eachRelease(t, func(t *testing.T, ds testbed.Datastore, rel string) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 29, OptIn: true, CalicoRelease: rel})
		conflist := env.Conflist(testbed.Capo)
		sbs := env.AddPods("kafka", 7, conflist, testbed.StatefulPod("kafka"))
		env.Agent.Stop()
		victim := sbs[2]
		if err := victim.Del(ctx); err != nil {
			t.Fatalf("DEL with the agent down must not block teardown: %v", err)
		}
		if !env.Allocated(victim.IPs[0]) {
			t.Fatal("the address was released while the agent was down")
		}
		if pending, _ := env.Journal().Pending(); len(pending) != 1 {
			t.Fatalf("journal holds %d records, want 1", len(pending))
		}
		// Still allocated, so nobody can take it: the pool's last free
		// address goes to the next pod, and the one after finds none.
		next := env.AddPods("next", 1, conflist, testbed.StatefulPod("next"))[0]
		if next.IP() == victim.IP() {
			t.Fatal("the journaled address was handed out")
		}
		env.Agent = env.StartAgent()
		eventually(t, 20*time.Second, "the agent replays the journaled DEL", func() bool { return !env.Allocated(victim.IPs[0]) })
		if _, ok := env.Reservations()[victim.IP()]; !ok {
			t.Fatal("replayed DEL released without reserving")
		}
		// The record goes right after the release succeeds.
		eventually(t, 5*time.Second, "journal empty after replay", func() bool {
			pending, _ := env.Journal().Pending()
			return len(pending) == 0
		})
		env.Agent.WaitMetric(1, "capo_agent_del_decisions_total", `outcome="journaled"`)
		env.Agent.WaitMetric(0, "capo_agent_journal_depth")
	})
}

func TestHundredConcurrentDels(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 24, OptIn: true})
		conflist := env.Conflist(testbed.Capo)
		sbs := env.AddPods("broker", 100, conflist, testbed.StatefulPod("broker"))
		errs := make(chan error, len(sbs))
		for _, sb := range sbs {
			go func() { errs <- sb.Del(ctx) }()
		}
		for range sbs {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		held := env.Reservations()
		var gone []net.IP
		for _, sb := range sbs {
			if _, ok := held[sb.IP()]; !ok {
				t.Errorf("%s of %s not reserved", sb.IP(), sb.Pod.Name)
			}
			gone = append(gone, sb.IPs[0])
		}
		if pending, _ := env.Journal().Pending(); len(pending) != 0 {
			t.Fatalf("%d DELs journaled; the agent was up", len(pending))
		}
		for _, sb := range env.AddPods("new", 50, conflist, testbed.StatefulPod("new")) {
			if slices.ContainsFunc(gone, sb.IPs[0].Equal) {
				t.Fatalf("new pod %s got reserved %s", sb.Pod.Name, sb.IP())
			}
		}
	})
}
