package controller

import (
	"context"
	"log/slog"
	"math"
	"net/netip"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/ipam"

	"github.com/capo-net/capo/pkg/reserve"
)

// PoolsEvery is how often the leader reads Calico's pool utilization: a
// read of every IPAM block, so not on every pass.
const PoolsEvery = time.Minute

// utilizer is the part of Calico's IPAM client that counts each pool's
// blocks; the controller's IPAM reader has it in production.
type utilizer interface {
	GetUtilization(ctx context.Context, args ipam.GetUtilizationArgs) ([]*ipam.PoolUtilization, error)
}

// poolUse is one pool's addresses: its size, those Calico has allocated,
// and those capo holds.
type poolUse struct {
	name                      string
	size, allocated, reserved float64
}

// free is what a new pod can still get, counting reserved addresses as
// unallocated (they almost all are: their pods are gone). Conservative: an
// address both reserved and still allocated (a lost node's pod before
// Calico's GC) is counted twice.
func (p poolUse) free() float64 { return max(0, p.size-p.allocated-p.reserved) }

// poolUsage sums Calico's utilization and capo's entries by pool. Blocks
// of no pool are left out.
func poolUsage(pools []*ipam.PoolUtilization, entries []reserve.Entry) []poolUse {
	var out []poolUse
	var prefixes []netip.Prefix
	for _, p := range pools {
		pfx, ok := prefixOf(p)
		if !ok {
			continue // "orphaned allocation blocks", or a CIDR that does not parse
		}
		ones, bits := p.CIDR.Mask.Size()
		u := poolUse{name: p.Name, size: math.Ldexp(1, bits-ones)}
		for _, b := range p.Blocks {
			u.allocated += float64(b.Capacity - b.Available)
		}
		out = append(out, u)
		prefixes = append(prefixes, pfx)
	}
	for _, e := range entries {
		addr, err := netip.ParseAddr(e.IP)
		if err != nil {
			continue // a CIDR held by hand: not one address
		}
		for i, pfx := range prefixes {
			if pfx.Contains(addr) {
				out[i].reserved++
				break
			}
		}
	}
	return out
}

func prefixOf(p *ipam.PoolUtilization) (netip.Prefix, bool) {
	if p.CIDR.IP == nil || p.CIDR.Mask == nil {
		return netip.Prefix{}, false
	}
	ones, bits := p.CIDR.Mask.Size()
	if bits == 0 || ones == 0 {
		return netip.Prefix{}, false
	}
	addr, ok := netip.AddrFromSlice(p.CIDR.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(addr.Unmap(), ones).Masked(), true
}

// poolGauges publishes each pool's use, at most every PoolsEvery: what
// tells an operator that reservations are eating a pool's last free
// addresses (CapoPoolNearlyFull).
func (rel *releaser) poolGauges(ctx context.Context, entries []reserve.Entry, released map[reserve.Ref]bool) {
	u, ok := rel.ipam.(utilizer)
	if !ok {
		return
	}
	now := rel.now()
	if !rel.poolsAt.IsZero() && now.Sub(rel.poolsAt) < PoolsEvery {
		return
	}
	rel.poolsAt = now
	pools, err := u.GetUtilization(ctx, ipam.GetUtilizationArgs{})
	if err != nil {
		slog.Warn("could not read Calico's pool utilization; capo_controller_pool_addresses keeps its last values", "err", err)
		return
	}
	kept := make([]reserve.Entry, 0, len(entries))
	for _, e := range entries {
		if !released[e.Ref()] {
			kept = append(kept, e)
		}
	}
	rel.metrics.pools.Reset()
	rel.metrics.poolSize.Reset()
	for _, p := range poolUsage(pools, kept) {
		allocated, reserved, free := p.partition()
		rel.metrics.poolSize.WithLabelValues(p.name).Set(p.size)
		rel.metrics.pools.WithLabelValues(p.name, "allocated").Set(allocated)
		rel.metrics.pools.WithLabelValues(p.name, "reserved").Set(reserved)
		rel.metrics.pools.WithLabelValues(p.name, "free").Set(free)
	}
}

// partition splits the pool into states that add up to its size, so a
// stacked graph or a sum by state is the pool: reserved (capo's, at most
// the pool), free, and allocated for the rest: Calico's allocations, an
// address both allocated and reserved (a lost node's pod before Calico's
// GC) counted once, as reserved.
func (p poolUse) partition() (allocated, reserved, free float64) {
	reserved = min(p.reserved, p.size)
	free = min(p.free(), p.size-reserved)
	return p.size - reserved - free, reserved, free
}
