package ipam

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	bapi "github.com/projectcalico/calico/libcalico-go/lib/backend/api"
	"github.com/projectcalico/calico/libcalico-go/lib/backend/model"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
)

// Backend is the Store libcalico-go's IPAM client reads, on its backend
// (crd.projectcalico.org/v1 or etcdv3); nil when c is not libcalico-go's
// client (it gives no backend).
func Backend(c any) Store {
	b, ok := c.(interface{ Backend() bapi.Client })
	if !ok {
		return nil
	}
	cc, ok := c.(clientv3.Interface)
	if !ok {
		return nil
	}
	return backend{b: b.Backend(), c: cc}
}

type backend struct {
	b bapi.Client
	c clientv3.Interface // its IPPools
}

func (s backend) HandleBlocks(ctx context.Context, handleID string) ([]netip.Prefix, error) {
	kv, err := s.b.Get(ctx, model.IPAMHandleKey{HandleID: handleID}, "")
	if err != nil {
		return nil, err
	}
	h, ok := kv.Value.(*model.IPAMHandle)
	if !ok {
		return nil, fmt.Errorf("IPAM handle %s read as %T", handleID, kv.Value)
	}
	out := make([]netip.Prefix, 0, len(h.Block))
	for k := range h.Block {
		p, err := netip.ParsePrefix(k)
		if err != nil {
			return nil, fmt.Errorf("IPAM handle %s names block %q: %w", handleID, k, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func (s backend) Block(ctx context.Context, cidr netip.Prefix) (*Block, error) {
	key := model.BlockKey{CIDR: cnet.IPNet{IPNet: net.IPNet{IP: net.IP(cidr.Addr().AsSlice()), Mask: net.CIDRMask(cidr.Bits(), cidr.Addr().BitLen())}}}
	kv, err := s.b.Get(ctx, key, "")
	if err != nil {
		return nil, err
	}
	b, ok := kv.Value.(*model.AllocationBlock)
	if !ok {
		return nil, fmt.Errorf("block %s read as %T", cidr, kv.Value)
	}
	out := &Block{CIDR: cidr, Allocations: b.Allocations, Attributes: make([]Attribute, len(b.Attributes))}
	for i, a := range b.Attributes {
		out.Attributes[i] = Attribute{Handle: a.AttrPrimary, Attrs: a.AttrSecondary}
	}
	return out, nil
}

func (s backend) Pools(ctx context.Context) ([]apiv3.IPPool, error) {
	l, err := s.c.IPPools().List(ctx, options.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}
