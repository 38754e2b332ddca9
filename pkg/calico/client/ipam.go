package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"strings"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	libapiv3 "github.com/projectcalico/calico/libcalico-go/lib/apis/v3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"k8s.io/client-go/rest"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/ipam"
)

// IPAM reads Calico's IPAM as calico-ipam keeps it in native
// projectcalico.org/v3 CRDs: the same questions, with the same answers and
// errors, as libcalico-go's IPAM client asks of crd.projectcalico.org/v1.
// It only reads: calico-ipam alone allocates and releases. The objects are
// decoded into libcalico-go's own structs, whose JSON is the v3 CRDs' spec.
type IPAM struct {
	rc rest.Interface
}

// NewIPAM reads through rc (any client of the API server: paths are
// absolute).
func NewIPAM(rc rest.Interface) *IPAM { return &IPAM{rc: rc} }

const apiPath = "/apis/" + apigroup.GroupV3 + "/"

// get reads one object of k into out. An absent object is libcalico-go's
// ErrorResourceDoesNotExist; a type that is not served is a NotServedError.
func (c *IPAM) get(ctx context.Context, k apigroup.Kind, name string, out any) error {
	raw, err := fetch(ctx, c.rc, apiPath+k.V3+"/"+name)
	if err != nil {
		return translateFor(k, err, name)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding %s %s: %w", k.Name, name, err)
	}
	return nil
}

// fetch reads path. Result.Error, not DoRaw nor Raw: only it decodes the
// API server's Status, which tells an absent object (a Status naming it)
// from a type that is not served (a plain 404 page).
func fetch(ctx context.Context, rc rest.Interface, path string) ([]byte, error) {
	res := rc.Get().AbsPath(path).Do(ctx)
	if err := res.Error(); err != nil {
		return nil, err
	}
	return res.Raw()
}

// list reads every object of k into out (a list type).
func (c *IPAM) list(ctx context.Context, k apigroup.Kind, out any) error {
	raw, err := fetch(ctx, c.rc, apiPath+k.V3)
	if err != nil {
		return translateFor(k, err, "")
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding the %s list: %w", k.Name, err)
	}
	return nil
}

// IPsByHandle is every address allocated to handleID, read from the blocks
// its IPAMHandle names. An unknown handle is ErrorResourceDoesNotExist.
func (c *IPAM) IPsByHandle(ctx context.Context, handleID string) ([]cnet.IP, error) {
	var h libapiv3.IPAMHandle
	// Calico names the object after the handle, lowercased (a name must be).
	if err := c.get(ctx, apigroup.IPAMHandle, strings.ToLower(handleID), &h); err != nil {
		return nil, err
	}
	ips := []cnet.IP{}
	for cidr := range h.Spec.Block {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			return nil, fmt.Errorf("IPAMHandle %s names block %q: %w", h.Name, cidr, err)
		}
		b, err := c.block(ctx, n)
		if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
			continue // gone since the handle was written, as libcalico-go skips it
		}
		if err != nil {
			return nil, err
		}
		ips = append(ips, byHandle(&b.IPAMBlock, handleID)...)
	}
	return ips, nil
}

// GetAssignmentAttributes is the allocation holding addr: its attributes
// and handle. A free address (no pool, no block, no allocation) is
// ErrorResourceDoesNotExist; one cooling in Calico's IP cooldown is a
// *calico.CoolingError, as Calico's own reader answers ErrorIPInCooldown
// there.
func (c *IPAM) GetAssignmentAttributes(ctx context.Context, addr cnet.IP) (map[string]string, *string, error) {
	pools, err := c.Pools(ctx)
	if err != nil {
		return nil, nil, err
	}
	n := blockOf(addr.IP, pools)
	if n == nil {
		return nil, nil, cerrors.ErrorResourceDoesNotExist{Identifier: addr.String(), Err: errors.New("no IPPool contains it")}
	}
	b, err := c.block(ctx, n)
	if err != nil {
		return nil, nil, err
	}
	return holder(b, addr.IP)
}

// AssignmentIn is GetAssignmentAttributes for an address of block
// (ipam.BlockOf): the block alone is read.
func (c *IPAM) AssignmentIn(ctx context.Context, block netip.Prefix, addr netip.Addr) (map[string]string, *string, error) {
	n := &net.IPNet{IP: net.IP(block.Addr().AsSlice()), Mask: net.CIDRMask(block.Bits(), block.Addr().BitLen())}
	b, err := c.block(ctx, n)
	if err != nil {
		return nil, nil, err
	}
	return holder(b, net.IP(addr.AsSlice()))
}

// Pools is every IPPool.
func (c *IPAM) Pools(ctx context.Context) ([]apiv3.IPPool, error) {
	var l apiv3.IPPoolList
	if err := c.list(ctx, apigroup.IPPool, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (c *IPAM) block(ctx context.Context, n *net.IPNet) (*block, error) {
	var b block
	if err := c.get(ctx, apigroup.IPAMBlock, blockName(n), &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// blockName is Calico's object name for a block: its CIDR with '.', ':'
// and '/' as '-'.
func blockName(n *net.IPNet) string {
	return strings.NewReplacer(".", "-", ":", "-", "/", "-").Replace(n.String())
}

// blockOf is the block addr falls in (ipam.BlockOf), nil when no pool
// contains it.
func blockOf(addr net.IP, pools []apiv3.IPPool) *net.IPNet {
	a, ok := netip.AddrFromSlice(addr)
	if !ok {
		return nil
	}
	b, ok := ipam.BlockOf(a, pools)
	if !ok {
		return nil
	}
	return &net.IPNet{IP: net.IP(b.Addr().AsSlice()), Mask: net.CIDRMask(b.Bits(), b.Addr().BitLen())}
}

// ordinal is addr's offset in b, or -1 when b does not contain it.
func ordinal(b *libapiv3.IPAMBlock, addr net.IP) (int, error) {
	_, n, err := net.ParseCIDR(b.Spec.CIDR)
	if err != nil {
		return 0, fmt.Errorf("IPAMBlock %s has CIDR %q: %w", b.Name, b.Spec.CIDR, err)
	}
	if !n.Contains(addr) {
		return -1, nil
	}
	off := new(big.Int).Sub(ipInt(addr), ipInt(n.IP))
	return int(off.Int64()), nil
}

func ipInt(ip net.IP) *big.Int {
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return new(big.Int).SetBytes(ip)
}

// attribute is the allocation at ordinal o of b, nil when it is free.
func attribute(b *libapiv3.IPAMBlock, o int) (*libapiv3.AllocationAttribute, error) {
	if o < 0 || o >= len(b.Spec.Allocations) || b.Spec.Allocations[o] == nil {
		return nil, nil
	}
	i := *b.Spec.Allocations[o]
	if i < 0 || i >= len(b.Spec.Attributes) {
		return nil, fmt.Errorf("IPAMBlock %s: ordinal %d points at attribute %d of %d", b.Name, o, i, len(b.Spec.Attributes))
	}
	return &b.Spec.Attributes[i], nil
}

func holder(b *block, addr net.IP) (map[string]string, *string, error) {
	o, err := ordinal(&b.IPAMBlock, addr)
	if err != nil {
		return nil, nil, err
	}
	if at := b.cooling(o); at != nil {
		return nil, nil, &calico.CoolingError{IP: addr.String(), ReleasedAt: at.Time}
	}
	a, err := attribute(&b.IPAMBlock, o)
	if err != nil {
		return nil, nil, err
	}
	if a == nil {
		return nil, nil, cerrors.ErrorResourceDoesNotExist{Identifier: addr.String(), Err: errors.New("IP is unassigned")}
	}
	return a.AttrSecondary, a.AttrPrimary, nil
}

// byHandle is every address of b allocated to handle.
func byHandle(b *libapiv3.IPAMBlock, handle string) []cnet.IP {
	_, n, err := net.ParseCIDR(b.Spec.CIDR)
	if err != nil {
		return nil
	}
	base := ipInt(n.IP)
	var ips []cnet.IP
	for o := range b.Spec.Allocations {
		a, err := attribute(b, o)
		if err != nil || a == nil || a.AttrPrimary == nil || *a.AttrPrimary != handle {
			continue
		}
		ip := new(big.Int).Add(base, big.NewInt(int64(o))).FillBytes(make([]byte, len(n.IP)))
		ips = append(ips, cnet.IP{IP: net.IP(ip)})
	}
	return ips
}
