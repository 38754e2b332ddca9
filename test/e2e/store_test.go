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
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/testbed"
)

func entry(ip string, at time.Time) reserve.Entry {
	return reserve.Entry{
		IP: ip, Namespace: "kafka", Pod: "broker-" + ip, PodUID: "uid-" + ip, Reason: reserve.ReasonCNIDel,
		ReservedAt: at, OwnerKind: "StatefulSet", OwnerName: "broker", OwnerUID: "owner-uid",
	}
}

func nodeEntries(t *testing.T, s reserve.Store, node string) map[string]reserve.Entry {
	t.Helper()
	all, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]reserve.Entry{}
	for _, e := range all.Entries {
		if e.Node == node {
			out[e.IP] = e
		}
	}
	return out
}

func refsOf(node string, ips ...string) []reserve.Ref {
	var out []reserve.Ref
	for _, ip := range ips {
		out = append(out, reserve.Ref{Node: node, IP: ip})
	}
	return out
}

func TestReservationStore(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{NoAgent: true})
		s := calicostore.New(env.Calico, reserve.DefaultLimits)
		first := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()

		res, err := s.Reserve(ctx, env.Node, []reserve.Entry{entry("10.250.0.1", first), entry("fd00:250::2", first)})
		if err != nil || len(res.Added) != 2 || len(res.AlreadyHeld) != 0 {
			t.Fatalf("first reserve: %+v %v", res, err)
		}
		res, err = s.Reserve(ctx, env.Node, []reserve.Entry{entry("FD00:250:0::2", time.Now()), entry("10.250.0.3", time.Now())})
		if err != nil || !slices.Equal(res.Added, []string{"10.250.0.3"}) || !slices.Equal(res.AlreadyHeld, []string{"fd00:250::2"}) {
			t.Fatalf("second reserve: %+v %v", res, err)
		}
		got := nodeEntries(t, s, env.Node)
		want := entry("fd00:250::2", first)
		want.Node = env.Node
		if len(got) != 3 || got["fd00:250::2"] != want {
			t.Fatalf("entries %+v\nwant fd00:250::2 = %+v (first timestamp kept)", got, want)
		}
		bucket, err := env.Calico.IPReservations().Get(ctx, calicostore.BucketName(calicostore.BucketOf(env.Node), 0), options.GetOptions{})
		if err != nil || !slices.Contains(bucket.Spec.ReservedCIDRs, "fd00:250::2/128") {
			t.Fatalf("Calico sees %v, %v", bucket, err)
		}

		released, err := s.Release(ctx, refsOf(env.Node, "10.250.0.1", "fd00:250::2/128", "10.250.9.9"))
		if err != nil || len(released) != 2 {
			t.Fatalf("release: %v %v", released, err)
		}
		if got := nodeEntries(t, s, env.Node); len(got) != 1 {
			t.Fatalf("after release: %v", got)
		}
	})
}

// Concurrent writers on one node's bucket: every write is a CAS, so all
// land. (The agent funnels its own writes through one batcher; this is the
// controller and an agent, or two agents during a rollout.)
func TestReservationStoreConcurrentWriters(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		env := bed.NewEnv(t, ds, testbed.EnvOptions{NoAgent: true})
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := calicostore.New(newCalicoClient(t, ds), reserve.DefaultLimits)
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
		if got := nodeEntries(t, calicostore.New(env.Calico, reserve.DefaultLimits), env.Node); len(got) != 16 {
			t.Fatalf("%d of 16 reservations landed", len(got))
		}
	})
}

// Worst-case names fill the byte budget, not the API server's annotation cap:
// the bucket spills into overflow objects, and the server accepts every one.
func TestReservationStoreOverflowsBySize(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{NoAgent: true})
		s := calicostore.New(env.Calico, reserve.DefaultLimits)
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
		b := calicostore.BucketOf(env.Node)
		head, err := env.Calico.IPReservations().Get(ctx, calicostore.BucketName(b, 0), options.GetOptions{})
		if err != nil || strings.Count(head.Annotations[calicostore.OverflowAnnotation], ",") < 1 {
			t.Fatalf("600 worst-case entries: head lists %q (%v); the byte budget was not applied", head.Annotations[calicostore.OverflowAnnotation], err)
		}
		var ips []string
		for _, e := range in {
			ips = append(ips, e.IP)
		}
		if rel, err := s.Release(ctx, refsOf(env.Node, ips...)); err != nil || len(rel) != 600 {
			t.Fatalf("released %d: %v", len(rel), err)
		}
		for i := range 4 {
			if _, err := env.Calico.IPReservations().Get(ctx, calicostore.BucketName(b, i), options.GetOptions{}); err == nil && i > 0 {
				t.Fatalf("emptied overflow object %d still exists", i)
			}
		}
	})
}
