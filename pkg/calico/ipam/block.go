package ipam

import (
	"context"
	"net/netip"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"

	"github.com/capo-net/capo/pkg/calico"
)

// BlockReader reads the allocation of an address in a block already
// known: one read, where libcalico-go's GetAssignmentAttributes makes two
// in turn (every pool, to find the block; then the block). Its answers are
// GetAssignmentAttributes': a free address is ErrorResourceDoesNotExist.
type BlockReader interface {
	AssignmentIn(ctx context.Context, block netip.Prefix, addr netip.Addr) (attrs map[string]string, handle *string, err error)
}

// WhoIn is Who for an address of block (BlockOf).
func WhoIn(ctx context.Context, r BlockReader, block netip.Prefix, ip netip.Addr) (*calico.Holder, error) {
	attrs, handle, err := r.AssignmentIn(ctx, block, ip)
	return holderOf(ip, attrs, handle, err)
}

// BlockOf is the block ip falls in, as calico-ipam carves blocks: the
// first pool of ip's family that contains it, enabled or not, cut to the
// pool's block size (Calico's default when unset). ok is false when no
// pool contains ip. A disabled pool's blocks keep their allocations: an
// operator disables the old pool while migrating, and its addresses are
// still held until their pods go.
func BlockOf(ip netip.Addr, pools []apiv3.IPPool) (block netip.Prefix, ok bool) {
	ip = ip.Unmap()
	for _, p := range pools {
		pfx, err := netip.ParsePrefix(p.Spec.CIDR)
		if err != nil || !pfx.Contains(ip) {
			continue
		}
		size := p.Spec.BlockSize
		if size == 0 {
			size = 26
			if ip.Is6() {
				size = 122
			}
		}
		b, err := ip.Prefix(size)
		return b, err == nil
	}
	return netip.Prefix{}, false
}

// BlockReaderOf is c's BlockReader: c itself if it is one, else one on
// libcalico-go's backend when c gives it (Backend), else nil.
func BlockReaderOf(c any) BlockReader {
	if r, ok := c.(BlockReader); ok {
		return r
	}
	if s := Backend(c); s != nil {
		return Reads{S: s}
	}
	return nil
}
