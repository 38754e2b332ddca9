package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/pkg/calico/ipam"
	"github.com/capo-net/capo/test/testbed"
)

// A returning pod's offer reads who holds its address in the block the
// pools give (ipam.WhoIn), one read where Calico's own
// GetAssignmentAttributes makes two. On each datastore, through
// libcalico-go's backend as the agent's client gives it, the answer must
// be Calico's own for an address calico-ipam assigned (both families), one
// it released, a free one in an assigned block, and one in a block that
// does not exist yet.
func TestBlockReadAgreesWithCalicos(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{NoAgent: true, DualStack: true, PoolPrefix: 24})
		blocks := ipam.BlockReaderOf(env.Calico)
		if blocks == nil {
			t.Fatalf("the agent's Calico client (%T) reads no block: every offer would read the pools first", env.Calico)
		}
		conf := env.IPAMNetConf(testbed.PlainCalico)
		var assigned []netip.Addr
		for i := range 3 {
			sb := env.NewSandbox(env.CreatePod(fmt.Sprintf("blk-%d", i)), nil)
			if _, err := env.ExecIPAM(ctx, "calico-ipam", "ADD", conf, sb); err != nil {
				t.Fatal(err)
			}
			ips, err := env.Calico.IPAM().IPsByHandle(ctx, "k8s-pod-network."+sb.ContainerID)
			if err != nil || len(ips) != 2 {
				t.Fatalf("sandbox %d was assigned %v: %v", i, ips, err)
			}
			for _, ip := range ips {
				a, _ := netip.AddrFromSlice(ip.IP)
				assigned = append(assigned, a.Unmap())
			}
			if i == 1 { // released: a free ordinal in an assigned block
				if _, err := env.ExecIPAM(ctx, "calico-ipam", "DEL", conf, sb); err != nil {
					t.Fatal(err)
				}
			}
		}
		pools, err := env.Calico.IPPools().List(ctx, options.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last := netip.MustParsePrefix(env.Pool.String()).Masked()
		lastAddr := last.Addr()
		for range 1<<(32-last.Bits()) - 2 {
			lastAddr = lastAddr.Next()
		}
		addrs := append(assigned, assigned[len(assigned)-1].Next(), lastAddr) // free in its block; most likely in no block yet
		held := 0
		for _, a := range addrs {
			want, err := ipam.Who(ctx, env.Calico.IPAM(), a)
			if err != nil {
				t.Fatalf("Calico's read of %s: %v", a, err)
			}
			b, ok := ipam.BlockOf(a, pools.Items)
			if !ok {
				t.Fatalf("%s is in no pool of %v", a, pools.Items)
			}
			got, err := ipam.WhoIn(ctx, blocks, b, a)
			if err != nil || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
				t.Errorf("%s in block %s: %+v %v; Calico's own read: %+v", a, b, got, err, want)
			}
			if want != nil {
				held++
			}
		}
		if held != 4 {
			t.Errorf("%d of the addresses read as held, want 4 (two sandboxes, two families): the test reads nothing", held)
		}
	})
}
