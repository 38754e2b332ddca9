package ipam

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"

	"github.com/capo-net/capo/pkg/calico"
)

// Block is an allocation block as calico-ipam keeps it, whichever the
// store: libcalico-go's model (crd.projectcalico.org/v1, etcdv3) or a
// native projectcalico.org/v3 IPAMBlock.
type Block struct {
	CIDR        netip.Prefix
	Allocations []*int // by ordinal: the index of its attribute; nil when free
	Attributes  []Attribute
}

// Attribute is one allocation's handle and attributes.
type Attribute struct {
	Handle *string
	Attrs  map[string]string
	// ReleasedAt is set on an allocation Calico 3.33+ released into its IP
	// cooldown (where the store says it: libcalico-go v3.31 drops it).
	ReleasedAt *time.Time
}

// Store is where calico-ipam keeps its objects. An absent handle or block
// is libcalico-go's ErrorResourceDoesNotExist.
type Store interface {
	HandleBlocks(ctx context.Context, handleID string) ([]netip.Prefix, error) // the blocks a handle's IPAMHandle names
	Block(ctx context.Context, cidr netip.Prefix) (*Block, error)
	Pools(ctx context.Context) ([]apiv3.IPPool, error)
}

// Reads answers libcalico-go's IPAM reads on a Store, as libcalico-go
// answers them, with two differences. A block that cannot be read is an
// error: libcalico-go's IPsByHandle logs and skips it, which reads as
// "this handle holds nothing there" and lets capo-ipam free the address
// unreserved. And an address's block is found whatever its pool's state:
// libcalico-go's GetAssignmentAttributes looks among enabled pools only,
// so every address of a pool disabled for a migration read as nobody's.
type Reads struct{ S Store }

var (
	_ HandleReader = Reads{}
	_ BlockReader  = Reads{}
)

// IPsByHandle is every address allocated to handleID, read from the blocks
// its IPAMHandle names. An unknown handle is ErrorResourceDoesNotExist; a
// block gone since the handle was written holds nothing of it.
func (r Reads) IPsByHandle(ctx context.Context, handleID string) ([]cnet.IP, error) {
	blocks, err := r.S.HandleBlocks(ctx, handleID)
	if err != nil {
		return nil, err
	}
	ips := []cnet.IP{}
	for _, cidr := range blocks {
		b, err := r.S.Block(ctx, cidr)
		if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading block %s of handle %s: %w", cidr, handleID, err)
		}
		ips = append(ips, b.byHandle(handleID)...)
	}
	return ips, nil
}

// GetAssignmentAttributes is the allocation holding addr, found in the
// block of the first pool that contains it (libcalico-go's looks among
// enabled pools only). A free address is ErrorResourceDoesNotExist; one
// cooling in Calico's IP cooldown is a *calico.CoolingError.
func (r Reads) GetAssignmentAttributes(ctx context.Context, addr cnet.IP) (map[string]string, *string, error) {
	a, ok := netip.AddrFromSlice(addr.IP)
	if !ok {
		return nil, nil, fmt.Errorf("%s is not an address", addr)
	}
	pools, err := r.S.Pools(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing IP pools: %w", err)
	}
	block, ok := BlockOf(a.Unmap(), pools)
	if !ok {
		return nil, nil, cerrors.ErrorResourceDoesNotExist{Identifier: addr.String(), Err: errors.New("no IPPool contains it")}
	}
	return r.AssignmentIn(ctx, block, a.Unmap())
}

// AssignmentIn is GetAssignmentAttributes for an address of block: the
// block alone is read.
func (r Reads) AssignmentIn(ctx context.Context, block netip.Prefix, addr netip.Addr) (map[string]string, *string, error) {
	b, err := r.S.Block(ctx, block)
	if err != nil {
		return nil, nil, err
	}
	return b.holder(addr.Unmap())
}

// holder is the allocation of addr in b: its attributes and handle.
func (b *Block) holder(addr netip.Addr) (map[string]string, *string, error) {
	a, err := b.attribute(addr)
	if err != nil {
		return nil, nil, err
	}
	if a == nil {
		return nil, nil, cerrors.ErrorResourceDoesNotExist{Identifier: addr.String(), Err: errors.New("IP is unassigned")}
	}
	if a.ReleasedAt != nil {
		return nil, nil, &calico.CoolingError{IP: addr.String(), ReleasedAt: *a.ReleasedAt}
	}
	if a.Handle == nil {
		return a.Attrs, nil, nil
	}
	h := sanitize(*a.Handle)
	return a.Attrs, &h, nil
}

// attribute is the allocation at addr's ordinal, nil when it is free.
func (b *Block) attribute(addr netip.Addr) (*Attribute, error) {
	if !b.CIDR.Contains(addr) {
		return nil, fmt.Errorf("%s is not in block %s", addr, b.CIDR)
	}
	return b.at(ordinal(b.CIDR, addr))
}

func (b *Block) at(o int) (*Attribute, error) {
	if o < 0 || o >= len(b.Allocations) || b.Allocations[o] == nil {
		return nil, nil
	}
	i := *b.Allocations[o]
	if i < 0 || i >= len(b.Attributes) {
		return nil, fmt.Errorf("block %s: ordinal %d points at attribute %d of %d", b.CIDR, o, i, len(b.Attributes))
	}
	return &b.Attributes[i], nil
}

// byHandle is every address of b allocated to handle.
func (b *Block) byHandle(handle string) []cnet.IP {
	var ips []cnet.IP
	addr := b.CIDR.Masked().Addr()
	for o := range b.Allocations {
		if a, err := b.at(o); err == nil && a != nil && a.Handle != nil && sanitize(*a.Handle) == handle {
			ips = append(ips, cnet.IP{IP: net.IP(addr.AsSlice())})
		}
		addr = addr.Next()
	}
	return ips
}

// ordinal is addr's offset in block: a block spans at most the last four
// bytes of an address (Calico's smallest blocks are /20 and /116).
func ordinal(block netip.Prefix, addr netip.Addr) int {
	b, a := block.Masked().Addr().As16(), addr.As16()
	return int(binary.BigEndian.Uint32(a[12:]) - binary.BigEndian.Uint32(b[12:]))
}

// sanitize is a handle as Calico compares it: everything from a "\r" on
// is dropped (host-local's migration to Calico IPAM once wrote such
// handles; libcalico-go's sanitizeHandle).
func sanitize(handle string) string {
	h, _, _ := strings.Cut(handle, "\r")
	return h
}
