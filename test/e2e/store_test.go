package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/testbed"
)

func entry(ip string, at time.Time) reserve.Entry {
	return reserve.Entry{IP: ip, Namespace: "kafka", Pod: "broker-" + ip, PodUID: "uid-" + ip, Reason: reserve.ReasonCNIDel,
		ReservedAt: at, OwnerKind: "StatefulSet", OwnerName: "broker", OwnerUID: "owner-uid"}
}

func nodeEntries(t *testing.T, s *reserve.CalicoStore, node string) map[string]reserve.Entry {
	t.Helper()
	all, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]reserve.Entry{}
	for _, e := range all {
		if e.Node == node {
			out[e.IP] = e
		}
	}
	return out
}

func TestReservationStore(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{})
		s := reserve.NewCalicoStore(env.Calico, reserve.DefaultLimits)
		first := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()

		res, err := s.Reserve(ctx, env.Node, []reserve.Entry{entry("10.250.0.1", first), entry("10.250.0.2", first)})
		if err != nil || len(res.Added) != 2 || len(res.AlreadyHeld) != 0 {
			t.Fatalf("first reserve: %+v %v", res, err)
		}
		res, err = s.Reserve(ctx, env.Node, []reserve.Entry{entry("10.250.0.2", time.Now()), entry("10.250.0.3", time.Now())})
		if err != nil || !slices.Equal(res.Added, []string{"10.250.0.3"}) || !slices.Equal(res.AlreadyHeld, []string{"10.250.0.2"}) {
			t.Fatalf("second reserve: %+v %v", res, err)
		}
		got := nodeEntries(t, s, env.Node)
		want := entry("10.250.0.2", first)
		want.Node = env.Node
		if len(got) != 3 || got["10.250.0.2"] != want {
			t.Fatalf("entries %+v\nwant 10.250.0.2 = %+v (first timestamp kept)", got, want)
		}
		res2, err := env.Calico.IPReservations().Get(ctx, reserve.ShardName(env.Node, 0), options.GetOptions{})
		if err != nil || len(res2.Spec.ReservedCIDRs) != 3 {
			t.Fatalf("Calico sees %v, %v", res2, err)
		}

		released, err := s.Release(ctx, env.Node, []string{"10.250.0.1", "10.250.9.9"})
		if err != nil || !slices.Equal(released, []string{"10.250.0.1"}) {
			t.Fatalf("release: %v %v", released, err)
		}
		if got := nodeEntries(t, s, env.Node); len(got) != 2 {
			t.Fatalf("after release: %v", got)
		}
	})
}

// Concurrent writers on one node's object: every write is a CAS, so all land.
// (The agent funnels its own writes through one batcher; this is the
// controller and an agent, or two agents during a rollout.) Eight writers,
// not more: libcalico-go's Kubernetes client is limited to 5 requests/s.
func TestReservationStoreConcurrentWriters(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		env := bed.NewEnv(t, ds, testbed.EnvOptions{})
		s := reserve.NewCalicoStore(env.Calico, reserve.DefaultLimits)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ips := []reserve.Entry{entry(fmt.Sprintf("10.251.%d.1", w), time.Now()), entry(fmt.Sprintf("10.251.%d.2", w), time.Now())}
				if _, err := s.Reserve(context.Background(), env.Node, ips); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if got := nodeEntries(t, s, env.Node); len(got) != 16 {
			t.Fatalf("%d of 16 reservations landed", len(got))
		}
	})
}

// Worst-case names fill the byte budget, not the API server's annotation cap:
// the store spills into more objects, and the server accepts every one.
func TestReservationStoreShardsBySize(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{})
		s := reserve.NewCalicoStore(env.Calico, reserve.DefaultLimits)
		var in []reserve.Entry
		for i := range 600 {
			e := entry(fmt.Sprintf("10.252.%d.%d", i/250, i%250+1), time.Now())
			e.Namespace, e.Pod, e.OwnerName = strings.Repeat("n", 63), fmt.Sprintf("%0253d", i), strings.Repeat("o", 253)
			in = append(in, e)
		}
		if _, err := s.Reserve(ctx, env.Node, in); err != nil {
			t.Fatal(err)
		}
		if got := nodeEntries(t, s, env.Node); len(got) != 600 {
			t.Fatalf("%d of 600 stored", len(got))
		}
		var shards int
		for ; ; shards++ {
			if _, err := env.Calico.IPReservations().Get(ctx, reserve.ShardName(env.Node, shards), options.GetOptions{}); err != nil {
				break
			}
		}
		if shards < 3 {
			t.Fatalf("600 worst-case entries in %d objects: the byte budget was not applied", shards)
		}
		// Releasing everything removes the trailing shards again.
		var ips []string
		for _, e := range in {
			ips = append(ips, e.IP)
		}
		if rel, err := s.Release(ctx, env.Node, ips); err != nil || len(rel) != 600 {
			t.Fatalf("released %d: %v", len(rel), err)
		}
		if _, err := env.Calico.IPReservations().Get(ctx, reserve.ShardName(env.Node, 1), options.GetOptions{}); err == nil {
			t.Fatal("emptied trailing shard still exists")
		}
	})
}
