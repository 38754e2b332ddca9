package e2e

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/testbed"
)

// controllerScalePoints are issue 14's sizes: reservations held, over nodes.
var controllerScalePoints = []struct{ held, nodes int }{{1000, 100}, {10000, 1000}, {50000, 5000}}

// BenchmarkControllerAtScale runs the real capo-controller against
// reservations held over nodes (10 each) and reports a release pass's time
// (nothing due; then 100 due on 100 nodes) and the controller's resident
// memory. It measures once per datastore and point, whatever b.N:
//
//	go test -run '^$' -bench 'ControllerAtScale/kubernetes' -benchtime 1x -timeout 60m ./test/e2e/
func BenchmarkControllerAtScale(b *testing.B) {
	for _, ds := range testbed.Datastores {
		for _, p := range controllerScalePoints {
			b.Run(fmt.Sprintf("%s/held=%d/nodes=%d", ds, p.held, p.nodes), func(b *testing.B) {
				controllerAtScale(b, ds, p.held, p.nodes)
			})
		}
	}
}

func controllerAtScale(b *testing.B, ds testbed.Datastore, held, nodes int) {
	ctx := context.Background()
	env := bed.NewEnv(b, ds, testbed.EnvOptions{NoAgent: true})
	env.ClearReservations()
	b.Cleanup(env.ClearReservations)
	env.SetConfig(configWith(fmt.Sprintf("ipReserveTime: 1h\nipReserveMaxCount: %d\n", 2*held)))
	store := calicostore.New(env.Calico, reserve.DefaultLimits)
	now := time.Now()
	// Seeded 8 nodes at a time, as agents would write them.
	seedNodes := func(nodes, per int, base int, age time.Duration) {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(8)
		for n := range nodes {
			var es []reserve.Entry
			for i := range per {
				k := base + n*per + i
				es = append(es, reserve.Entry{
					IP: net.IPv4(10, 200+byte(k>>16), byte(k>>8), byte(k)).String(), Namespace: env.Namespace,
					Pod: fmt.Sprintf("broker-%d", k), PodUID: "8f0e2b9c-6a51-4c1e-9d3b-1f2a3b4c5d6e", Reason: reserve.ReasonCNIDel,
					ReservedAt: now.Add(-age), Seen: now.Add(-age), OwnerKind: "Job", OwnerName: "batch", OwnerUID: "5b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d",
				})
			}
			g.Go(func() error {
				_, err := store.Reserve(gctx, fmt.Sprintf("scale-%s-%d", env.ID, base+n), es)
				return err
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	seedNodes(nodes, held/nodes, 0, time.Minute)
	syscall.Sync() // the controller's pages written back, as an image's are (see agentAtScale)
	c := env.StartController("scale")
	passes := func() (float64, float64) {
		return c.Metric("capo_controller_release_pass_duration_seconds_count"), c.Metric("capo_controller_release_pass_duration_seconds_sum")
	}
	for n, _ := passes(); n < 5; n, _ = passes() {
		time.Sleep(200 * time.Millisecond)
	}
	if got := c.Metric("capo_controller_reserved_ips"); got != float64(held) {
		b.Fatalf("the controller holds %v reservations after its first passes, want %d (nothing is due)", got, held)
	}
	n0, s0 := passes()
	time.Sleep(5 * time.Second)
	n1, s1 := passes()
	idle := (s1 - s0) / (n1 - n0)
	rss := float64(c.RSSBytes()) / (1 << 20)
	anon := float64(c.AnonRSSBytes()) / (1 << 20)

	seedNodes(100, 1, 2*held, 2*time.Hour)
	due := time.Now()
	eventually(b, 60*time.Second, "100 due reservations released", func() bool { return c.Metric("capo_controller_releases_total", `reason="ttl"`) == 100 })
	n2, s2 := passes()
	// The passes since the seed include the one that released all 100.
	busy := (s2 - s1) / (n2 - n1)
	b.ReportMetric(time.Since(due).Seconds(), "s-until-100-due-released")
	b.ReportMetric(idle*1000, "pass-ms(nothing-due)")
	b.ReportMetric(busy*1000, "pass-ms(100-due-avg)")
	b.ReportMetric(rss, "rss-MiB")
	b.ReportMetric(anon, "anon-rss-MiB")
	b.ReportMetric(float64(c.PeakRSSBytes())/(1<<20), "peak-rss-MiB")
	b.ReportMetric(c.Metric("capo_controller_planner_duration_seconds_sum")/c.Metric("capo_controller_planner_duration_seconds_count")*1000, "plan-ms")
}
