package nativev3

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/calico/client"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/testbed"
)

// A v3-capable calico-ipam honours the reservations capo's v3 store
// writes: in a /30 pool with three addresses held by capo, the one pod
// gets the fourth. (capo's own IPReservations are what Calico reads in
// this mode; the v1 ones it never reads.)
func TestV3CalicoHonoursCapoReservations(t *testing.T) {
	testbed.SkipWithoutCalicoFromEnv(t)
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 30, NoAgent: true, CalicoRelease: testbed.CalicoFromEnv})
	objs, err := client.New(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	s := calicostore.NewOn(objs, reserve.DefaultLimits)
	pool := netip.MustParsePrefix(env.Pool.String())
	addrs := []netip.Addr{pool.Addr(), pool.Addr().Next(), pool.Addr().Next().Next()}
	var held []reserve.Entry
	for _, a := range addrs {
		held = append(held, entry(a.String(), time.Now().UTC().Truncate(time.Second)))
	}
	if _, err := s.Reserve(ctx, env.Node, held); err != nil {
		t.Fatal(err)
	}
	sb := env.AddPods("web", 1, env.Conflist(testbed.PlainCalico))[0]
	if want := addrs[2].Next().String(); sb.IP() != want {
		t.Fatalf("the pod got %s, want %s: capo's v3 reservations were not honoured", sb.IP(), want)
	}
}
