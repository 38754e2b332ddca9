package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/testbed"
)

// BenchmarkReserveDEL compares the DEL of a selected pod through capo-ipam,
// which asks the agent to write a reservation before calico-ipam releases,
// with calico-ipam's DEL alone. Same datastore, interleaved.
func BenchmarkReserveDEL(b *testing.B) {
	for _, ds := range testbed.Datastores {
		b.Run(string(ds), func(b *testing.B) {
			ctx := context.Background()
			plainEnv := bed.NewEnv(b, ds, testbed.EnvOptions{PoolPrefix: 24, NoAgent: true})
			capoEnv := bed.NewEnv(b, ds, testbed.EnvOptions{PoolPrefix: 24, OptIn: true})
			store := calicostore.New(capoEnv.Calico, reserve.DefaultLimits)
			type side struct {
				env     *testbed.Env
				plugin  string
				netconf []byte
				sb      *testbed.Sandbox
				took    []time.Duration
			}
			plain := &side{env: plainEnv, plugin: "calico-ipam", netconf: plainEnv.IPAMNetConf(testbed.PlainCalico)}
			capo := &side{env: capoEnv, plugin: "capo-ipam", netconf: capoEnv.IPAMNetConf(testbed.Capo)}
			plain.sb = plainEnv.NewSandbox(plainEnv.CreatePod("redis-0", testbed.StatefulPod("redis")), nil)
			capo.sb = capoEnv.NewSandbox(capoEnv.CreatePod("redis-0", testbed.StatefulPod("redis")), nil)
			time.Sleep(500 * time.Millisecond) // the agent's watch has the pod
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				order := []*side{plain, capo}
				if i%2 == 1 {
					order = []*side{capo, plain}
				}
				for _, s := range order {
					s.sb.ContainerID = testbed.NewContainerID()
					if _, err := s.env.ExecIPAM(ctx, s.plugin, "ADD", s.netconf, s.sb); err != nil {
						b.Fatal(err)
					}
					took, err := s.env.ExecIPAM(ctx, s.plugin, "DEL", s.netconf, s.sb)
					if err != nil {
						b.Fatal(err)
					}
					s.took = append(s.took, took)
				}
				// Keep the pool from filling with this run's reservations.
				held, err := store.ListNode(ctx, capoEnv.Node)
				if err != nil || len(held) != 1 {
					b.Fatalf("after a capo DEL the node holds %d reservations (%v), want 1", len(held), err)
				}
				if _, err := store.Release(ctx, []reserve.Ref{held[0].Ref()}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			report(b, "plain", plain.took, "capo", capo.took)
		})
	}
}

// BenchmarkADDWithReservations measures calico-ipam's ADD, which lists every
// IPReservation, with nothing held, with 1000 addresses held for one node,
// and with 1000 held over 50 nodes, as the store writes them.
func BenchmarkADDWithReservations(b *testing.B) {
	for _, ds := range testbed.Datastores {
		b.Run(string(ds), func(b *testing.B) {
			env := bed.NewEnv(b, ds, testbed.EnvOptions{PoolPrefix: 24, NoAgent: true})
			store := calicostore.New(env.Calico, reserve.DefaultLimits)
			hold := func(nodes int) func() {
				return func() { holdThousand(b, store, nodes) }
			}
			states := []*holdState{{name: "none"}, {name: "1node", setup: hold(1)}, {name: "50nodes", setup: hold(50)}}
			timeADDs(b, env, states)
			report(b, "none", states[0].took, "1node", states[1].took)
			report(b, "none", states[0].took, "50nodes", states[2].took)
		})
	}
}

// holdThousand reserves 1000 addresses, outside every pool, spread over n
// nodes, with realistic metadata.
func holdThousand(b *testing.B, store reserve.Store, nodes int) {
	now := time.Now()
	for n := range nodes {
		var es []reserve.Entry
		for i := n * 1000 / nodes; i < (n+1)*1000/nodes; i++ {
			es = append(es, benchEntry(i, now))
		}
		if _, err := store.Reserve(context.Background(), fmt.Sprintf("bench-node-%d", n), es); err != nil {
			b.Fatal(err)
		}
	}
}

// benchEntry is reservation i, outside every pool, with the metadata of a
// StatefulSet's pod: one of 50 sets, and UIDs as random as real ones (they
// are most of the bytes Calico reads).
func benchEntry(i int, at time.Time) reserve.Entry {
	return reserve.Entry{
		IP: net.IPv4(10, 240+byte(i>>16), byte(i>>8), byte(i)).String(), Namespace: "kafka-prod", Pod: fmt.Sprintf("broker-%d", i),
		PodUID: fakeUID("pod", i), Reason: reserve.ReasonCNIDel, ReservedAt: at, Seen: at.Add(2 * time.Second),
		OwnerKind: "StatefulSet", OwnerName: fmt.Sprintf("broker-%d", i%50), OwnerUID: fakeUID("set", i%50),
	}
}

// fakeUID is a UUID that looks random and is the same on every run.
func fakeUID(kind string, i int) string {
	h := sha256.Sum256([]byte(fmt.Sprint(kind, i)))
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// holdState is what the datastore holds while calico-ipam's ADD is timed.
type holdState struct {
	name  string
	setup func() // makes the objects; nil: none
	took  []time.Duration
}

// timeADDs times calico-ipam's ADD b.N times in each state, in blocks of
// five, rotating through the states so that drift on a shared machine
// falls on all of them alike.
func timeADDs(b *testing.B, env *testbed.Env, states []*holdState) {
	ctx := context.Background()
	netconf := env.IPAMNetConf(testbed.PlainCalico)
	sb := env.NewSandbox(env.CreatePod("bench-0"), nil)
	const block = 5
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		for k := range states {
			st := states[(k+done/block)%len(states)]
			b.StopTimer()
			clearReservations(b, env)
			if st.setup != nil {
				st.setup()
			}
			b.StartTimer()
			for range block {
				sb.ContainerID = testbed.NewContainerID()
				took, err := env.ExecIPAM(ctx, "calico-ipam", "ADD", netconf, sb)
				if err != nil {
					b.Fatal(err)
				}
				st.took = append(st.took, took)
				if _, err := env.ExecIPAM(ctx, "calico-ipam", "DEL", netconf, sb); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.StopTimer()
	clearReservations(b, env)
}

func clearReservations(b *testing.B, env *testbed.Env) {
	ctx := context.Background()
	list, err := env.Calico.IPReservations().List(ctx, options.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range list.Items {
		if _, err := env.Calico.IPReservations().Delete(ctx, r.Name, options.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// report publishes median and p99 of two samples and their ratios.
func report(b *testing.B, baseName string, base []time.Duration, name string, got []time.Duration) {
	p50b, p99b := testbed.Percentiles(base)
	p50, p99 := testbed.Percentiles(got)
	b.ReportMetric(testbed.Ms(p50b), baseName+"-p50-ms")
	b.ReportMetric(testbed.Ms(p99b), baseName+"-p99-ms")
	b.ReportMetric(testbed.Ms(p50), name+"-p50-ms")
	b.ReportMetric(testbed.Ms(p99), name+"-p99-ms")
	b.ReportMetric(float64(p50)/float64(p50b), name+"-ratio-p50")
	b.ReportMetric(float64(p99)/float64(p99b), name+"-ratio-p99")
	if d, ok := pairedAdded(base, got); ok {
		b.ReportMetric(testbed.Ms(d), name+"-added-paired-ms")
	}
}

// pairedAdded is the median of got[i]-base[i] over rounds that ran both,
// interleaved: what got adds, with the datastore's drift from round to
// round taken out (the difference of two medians keeps it).
func pairedAdded(base, got []time.Duration) (time.Duration, bool) {
	if len(base) != len(got) || len(got) == 0 {
		return 0, false
	}
	diffs := make([]time.Duration, len(got))
	for i := range got {
		diffs[i] = got[i] - base[i]
	}
	p50, _ := testbed.Percentiles(diffs)
	return p50, true
}
