package controller

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/ipam"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capo-net/capo/pkg/reserve"
)

func cidr(s string) net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return *n
}

// withUtilization is holders that also counts the pools, as Calico's IPAM
// client does.
type withUtilization struct {
	*holders
	pools []*ipam.PoolUtilization
	err   error
	reads int
}

func (w *withUtilization) GetUtilization(context.Context, ipam.GetUtilizationArgs) ([]*ipam.PoolUtilization, error) {
	w.reads++
	return w.pools, w.err
}

func TestPoolUsage(t *testing.T) {
	pools := []*ipam.PoolUtilization{
		{Name: "small", CIDR: cidr("10.0.0.0/24"), Blocks: []ipam.BlockUtilization{
			{CIDR: cidr("10.0.0.0/26"), Capacity: 64, Available: 4},
			{CIDR: cidr("10.0.0.64/26"), Capacity: 64, Available: 60},
		}},
		{Name: "v6", CIDR: cidr("fd00::/112"), Blocks: []ipam.BlockUtilization{{CIDR: cidr("fd00::/122"), Capacity: 64, Available: 64}}},
		{Name: "orphaned allocation blocks", CIDR: cidr("0.0.0.0/0")},
	}
	entries := []reserve.Entry{{IP: "10.0.0.5"}, {IP: "10.0.0.70"}, {IP: "fd00::9"}, {IP: "10.9.0.1"}, {IP: "10.0.0.0/30"}}
	got := poolUsage(pools, entries)
	want := []poolUse{{"small", 256, 64, 2}, {"v6", 65536, 0, 1}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("pool %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if f := got[0].free(); f != 190 {
		t.Errorf("free %v, want 256-64-2", f)
	}
	if f := (poolUse{size: 4, allocated: 3, reserved: 2}).free(); f != 0 {
		t.Errorf("free below zero: %v", f)
	}
}

// The published states partition the pool: they add up to its size, an
// address both allocated and reserved counted once.
func TestPoolPartition(t *testing.T) {
	for _, p := range []poolUse{
		{size: 256, allocated: 64, reserved: 2},
		{size: 4, allocated: 3, reserved: 2},
		{size: 4, allocated: 0, reserved: 9},
		{size: 16, allocated: 16, reserved: 0},
		{size: 16},
	} {
		a, r, f := p.partition()
		if a+r+f != p.size || a < 0 || r < 0 || f < 0 {
			t.Errorf("%+v: allocated %v reserved %v free %v, sum %v", p, a, r, f, a+r+f)
		}
		if r != min(p.reserved, p.size) {
			t.Errorf("%+v: reserved %v", p, r)
		}
	}
}

// The leader publishes each pool's use after a pass, reads Calico at most
// once a minute, and keeps the last values when a read fails.
func TestPassPublishesPoolUse(t *testing.T) {
	b := newPassBed(t)
	u := &withUtilization{holders: b.c.ipam.(*holders), pools: []*ipam.PoolUtilization{
		{Name: "p", CIDR: cidr("10.0.0.0/28"), Blocks: []ipam.BlockUtilization{{CIDR: cidr("10.0.0.0/28"), Capacity: 16, Available: 6}}},
	}}
	b.c.ipam = u
	b.reserve("n1", held("10.0.0.1", "kafka", "a-0", time.Minute), held("10.0.0.2", "kafka", "b-0", 2*time.Hour))
	b.pass()
	gauge := func(state string) float64 { return testutil.ToFloat64(b.c.metrics.pools.WithLabelValues("p", state)) }
	size := testutil.ToFloat64(b.c.metrics.poolSize.WithLabelValues("p"))
	// 10.0.0.2 is past the hour and released by this pass: not counted.
	if size != 16 || gauge("allocated") != 10 || gauge("reserved") != 1 || gauge("free") != 5 {
		t.Fatalf("size %v allocated %v reserved %v free %v", size, gauge("allocated"), gauge("reserved"), gauge("free"))
	}
	if n := testutil.CollectAndCount(b.c.metrics.pools); n != 3 {
		t.Errorf("%d pool series, want the 3 states of the partition", n)
	}
	u.err = errors.New("etcd away")
	b.c.releaser.poolsAt = time.Time{}
	b.pass()
	if gauge("free") != 5 {
		t.Errorf("a failed read changed the gauges: free %v", gauge("free"))
	}
	reads := u.reads
	b.pass()
	if u.reads != reads {
		t.Errorf("read Calico's blocks again within %v", PoolsEvery)
	}
}
