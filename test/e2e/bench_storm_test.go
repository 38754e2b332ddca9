package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/testbed"
)

// BenchmarkReserveStorm is 50 nodes tearing down 20 selected pods each
// within one second, each node's agent with its own client (50 requests/s,
// the agent's default) and its batcher, as in a cluster-wide restart. The
// nodes are spread over 1, 2, 4, 8 or 16 buckets, which is what the bucket
// count decides: how many nodes write to one object at once. It reports the
// compare-and-swap conflicts per storm and the reserve latency.
func BenchmarkReserveStorm(b *testing.B) {
	for _, ds := range testbed.Datastores {
		for _, buckets := range []int{1, 2, 4, 8, 16} {
			b.Run(fmt.Sprintf("%s/%d-buckets", ds, buckets), func(b *testing.B) {
				env := bed.NewEnv(b, ds, testbed.EnvOptions{NoAgent: true})
				agents := stormAgents(b, ds, 50, buckets)
				var conflicts, writes int64
				var took []time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					clearReservations(b, env)
					c0, w0 := totals(agents)
					b.StartTimer()
					took = append(took, reserveStorm(b, agents, 20, i)...)
					c1, w1 := totals(agents)
					conflicts, writes = conflicts+c1-c0, writes+w1-w0
				}
				b.StopTimer()
				clearReservations(b, env)
				p50, p99 := testbed.Percentiles(took)
				b.ReportMetric(float64(conflicts)/float64(b.N), "conflicts/storm")
				b.ReportMetric(float64(writes)/float64(b.N), "writes/storm")
				b.ReportMetric(testbed.Ms(p50), "reserve-p50-ms")
				b.ReportMetric(testbed.Ms(p99), "reserve-p99-ms")
			})
		}
	}
}

type stormAgent struct {
	node    string
	store   *calicostore.Store
	batcher *reserve.Batcher
}

// stormAgents are n agents on nodes whose names hash into the first
// `buckets` buckets, evenly.
func stormAgents(b *testing.B, ds testbed.Datastore, n, buckets int) []*stormAgent {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	var out []*stormAgent
	per := make([]int, buckets)
	for i := 0; len(out) < n; i++ {
		node := fmt.Sprintf("storm-%d-%d", buckets, i)
		k := calicostore.BucketOf(node)
		if k >= buckets || per[k] >= (n+buckets-1)/buckets {
			continue
		}
		per[k]++
		cfg := bed.CalicoAPIConfig(ds)
		cfg.Spec.K8sClientQPS = 50
		c, err := clientv3.New(*cfg)
		if err != nil {
			b.Fatal(err)
		}
		s := calicostore.New(c, reserve.DefaultLimits)
		a := &stormAgent{node: node, store: s, batcher: reserve.NewBatcher(s, node, func() time.Duration { return 30 * time.Second })}
		go a.batcher.Run(ctx)
		out = append(out, a)
	}
	return out
}

func totals(agents []*stormAgent) (conflicts, writes int64) {
	for _, a := range agents {
		conflicts, writes = conflicts+a.store.Conflicts(), writes+a.store.Writes()
	}
	return conflicts, writes
}

// reserveStorm tears down perNode pods on every agent's node at random moments
// within a second and returns how long each reservation took.
func reserveStorm(b *testing.B, agents []*stormAgent, perNode, round int) []time.Duration {
	var mu sync.Mutex
	var took []time.Duration
	var wg sync.WaitGroup
	for n, a := range agents {
		for p := range perNode {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(rand.N(time.Second))
				e := benchEntry((round%100)*50*perNode+n*perNode+p, time.Now())
				start := time.Now()
				if _, err := a.batcher.Reserve(context.Background(), []reserve.Entry{e}); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				took = append(took, time.Since(start))
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return took
}
