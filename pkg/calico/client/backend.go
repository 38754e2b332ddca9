package client

import (
	"context"
	"net/netip"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cipam "github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"

	"github.com/capo-net/capo/pkg/calico/ipam"
)

// onBackend is libcalico-go's client (crd.projectcalico.org/v1, etcdv3)
// with capo's reads of Calico IPAM over the same backend (ipam.Reads):
// a block that cannot be read is an error, where libcalico-go's
// IPsByHandle skips it and answers "this handle holds nothing there", and
// an address's block is found whatever its pool's state.
type onBackend struct {
	clientv3.Interface
	reads ipam.Reads
}

func (c onBackend) IPAM() cipam.Interface {
	return backendIPAM{Interface: c.Interface.IPAM(), reads: c.reads}
}

// AssignmentIn reads an allocation in a known block (ipam.BlockReader).
func (c onBackend) AssignmentIn(ctx context.Context, block netip.Prefix, addr netip.Addr) (map[string]string, *string, error) {
	return c.reads.AssignmentIn(ctx, block, addr)
}

// backendIPAM is libcalico-go's IPAM client with capo's reads.
type backendIPAM struct {
	cipam.Interface
	reads ipam.Reads
}

func (i backendIPAM) IPsByHandle(ctx context.Context, handleID string) ([]cnet.IP, error) {
	return i.reads.IPsByHandle(ctx, handleID)
}

func (i backendIPAM) GetAssignmentAttributes(ctx context.Context, addr cnet.IP) (map[string]string, *string, error) {
	return i.reads.GetAssignmentAttributes(ctx, addr)
}
