package ipam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	bapi "github.com/projectcalico/calico/libcalico-go/lib/backend/api"
	"github.com/projectcalico/calico/libcalico-go/lib/backend/model"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"

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

// Enabled are the pools that are not disabled: where libcalico-go's
// GetAssignmentAttributes looks for an address's block.
func Enabled(pools []apiv3.IPPool) []apiv3.IPPool {
	var out []apiv3.IPPool
	for _, p := range pools {
		if !p.Spec.Disabled {
			out = append(out, p)
		}
	}
	return out
}

// BlockReaderOf is c's BlockReader: c itself if it is one, else one on
// libcalico-go's backend when c gives it (Backend, as libcalico-go's
// client does), else nil.
func BlockReaderOf(c any) BlockReader {
	if r, ok := c.(BlockReader); ok {
		return r
	}
	if b, ok := c.(interface{ Backend() bapi.Client }); ok {
		return backendBlocks{b.Backend()}
	}
	return nil
}

// backendBlocks reads blocks where libcalico-go's IPAM client reads them:
// its backend (crd.projectcalico.org/v1 or etcdv3).
type backendBlocks struct{ b bapi.Client }

func (r backendBlocks) AssignmentIn(ctx context.Context, block netip.Prefix, addr netip.Addr) (map[string]string, *string, error) {
	cidr := cnet.IPNet{IPNet: net.IPNet{IP: net.IP(block.Addr().AsSlice()), Mask: net.CIDRMask(block.Bits(), block.Addr().BitLen())}}
	kv, err := r.b.Get(ctx, model.BlockKey{CIDR: cidr}, "")
	if err != nil {
		return nil, nil, err
	}
	b, ok := kv.Value.(*model.AllocationBlock)
	if !ok {
		return nil, nil, fmt.Errorf("block %s read as %T", block, kv.Value)
	}
	ord, err := b.IPToOrdinal(cnet.IP{IP: net.IP(addr.AsSlice())})
	if err != nil {
		return nil, nil, err
	}
	i := b.Allocations[ord]
	if i == nil {
		return nil, nil, cerrors.ErrorResourceDoesNotExist{Identifier: addr.String(), Err: errors.New("IP is unassigned")}
	}
	if *i < 0 || *i >= len(b.Attributes) {
		return nil, nil, fmt.Errorf("block %s: %s points at attribute %d of %d", block, addr, *i, len(b.Attributes))
	}
	a := b.Attributes[*i]
	if a.AttrPrimary == nil {
		return a.AttrSecondary, nil, nil
	}
	// A handle may carry a "\r"-separated suffix; Calico's readers drop it.
	h, _, _ := strings.Cut(*a.AttrPrimary, "\r")
	return a.AttrSecondary, &h, nil
}
