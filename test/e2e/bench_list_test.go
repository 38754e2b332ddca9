package e2e

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/testbed"
)

// BenchmarkReservationList times what every calico-ipam ADD does with the
// reservations, in this process: list every IPReservation through
// libcalico-go (the API server or etcd doing its part) and parse every CIDR.
// Without an exec and the rest of the ADD, the cost of each layout shows
// above the machine's noise: it is what the layout adds to each ADD.
func BenchmarkReservationList(b *testing.B) {
	type layout struct {
		name string
		objs func(b *testing.B) []apiv3.IPReservation
	}
	layouts := []layout{{"none", func(*testing.B) []apiv3.IPReservation { return nil }}}
	for _, n := range []struct {
		name           string
		nodes, perNode int
	}{{"300", 300, 1}, {"10k", 1000, 10}} {
		for _, k := range []int{1, 4, 8, 16, 32, 64} {
			if k*reserve.DefaultLimits.MaxIPs < n.nodes*n.perNode {
				continue // more than objects may hold
			}
			layouts = append(layouts, layout{fmt.Sprintf("%s-in-%d-objects", n.name, k), func(b *testing.B) []apiv3.IPReservation {
				return regroup(b, inMemory(b, reserve.DefaultLimits, n.nodes, n.perNode), k)
			}})
		}
		layouts = append(layouts, layout{n.name + "-in-16-objects-bare", func(b *testing.B) []apiv3.IPReservation {
			return stripMetadata(regroup(b, inMemory(b, reserve.DefaultLimits, n.nodes, n.perNode), 16))
		}})
	}
	layouts = append(layouts, layout{"300-per-node", func(b *testing.B) []apiv3.IPReservation { return perNodeObjects(b, 300, 1) }})
	for _, ds := range testbed.Datastores {
		for _, l := range layouts {
			b.Run(fmt.Sprintf("%s/%s", ds, l.name), func(b *testing.B) {
				env := bed.NewEnv(b, ds, testbed.EnvOptions{NoAgent: true})
				clearReservations(b, env)
				objs := l.objs(b)
				recreate(b, env.Calico, objs)()
				b.Cleanup(func() { clearReservations(b, env) })
				ctx := context.Background()
				for range 20 { // warm the client, the server and its cache
					if _, err := env.Calico.IPReservations().List(ctx, options.ListOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				var took []time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					start := time.Now()
					list, err := env.Calico.IPReservations().List(ctx, options.ListOptions{})
					if err != nil {
						b.Fatal(err)
					}
					for _, r := range list.Items {
						for _, c := range r.Spec.ReservedCIDRs {
							if _, _, err := net.ParseCIDR(c); err != nil {
								b.Fatal(err)
							}
						}
					}
					took = append(took, time.Since(start))
				}
				p50, _ := testbed.Percentiles(took)
				b.ReportMetric(testbed.Ms(p50), "list-p50-ms")
				b.ReportMetric(float64(len(objs)), "objects")
			})
		}
	}
}
