package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	libapiv3 "github.com/projectcalico/calico/libcalico-go/lib/apis/v3"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"k8s.io/client-go/rest"

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

var _ ipam.Store = (*IPAM)(nil)

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

// IPsByHandle is every address allocated to handleID (ipam.Reads: a block
// that cannot be read is an error).
func (c *IPAM) IPsByHandle(ctx context.Context, handleID string) ([]cnet.IP, error) {
	return ipam.Reads{S: c}.IPsByHandle(ctx, handleID)
}

// GetAssignmentAttributes is the allocation holding addr: its attributes
// and handle (ipam.Reads). A free address is ErrorResourceDoesNotExist;
// one cooling in Calico's IP cooldown is a *calico.CoolingError, as
// Calico's own reader answers ErrorIPInCooldown there.
func (c *IPAM) GetAssignmentAttributes(ctx context.Context, addr cnet.IP) (map[string]string, *string, error) {
	return ipam.Reads{S: c}.GetAssignmentAttributes(ctx, addr)
}

// AssignmentIn is GetAssignmentAttributes for an address of block
// (ipam.BlockOf): the block alone is read.
func (c *IPAM) AssignmentIn(ctx context.Context, block netip.Prefix, addr netip.Addr) (map[string]string, *string, error) {
	return ipam.Reads{S: c}.AssignmentIn(ctx, block, addr)
}

// Pools is every IPPool.
func (c *IPAM) Pools(ctx context.Context) ([]apiv3.IPPool, error) {
	var l apiv3.IPPoolList
	if err := c.list(ctx, apigroup.IPPool, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// HandleBlocks are the blocks handleID's IPAMHandle names (ipam.Store).
func (c *IPAM) HandleBlocks(ctx context.Context, handleID string) ([]netip.Prefix, error) {
	var h libapiv3.IPAMHandle
	// Calico names the object after the handle, lowercased (a name must be).
	if err := c.get(ctx, apigroup.IPAMHandle, strings.ToLower(handleID), &h); err != nil {
		return nil, err
	}
	out := make([]netip.Prefix, 0, len(h.Spec.Block))
	for cidr := range h.Spec.Block {
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			return nil, fmt.Errorf("IPAMHandle %s names block %q: %w", h.Name, cidr, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Block reads one IPAMBlock (ipam.Store).
func (c *IPAM) Block(ctx context.Context, cidr netip.Prefix) (*ipam.Block, error) {
	var b block
	if err := c.get(ctx, apigroup.IPAMBlock, blockName(cidr), &b); err != nil {
		return nil, err
	}
	return b.read()
}

// blockName is Calico's object name for a block: its CIDR with '.', ':'
// and '/' as '-'.
func blockName(cidr netip.Prefix) string {
	return strings.NewReplacer(".", "-", ":", "-", "/", "-").Replace(cidr.String())
}
