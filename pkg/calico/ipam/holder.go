// Package ipam reads Calico IPAM for capo: who holds an address now, and
// the block an address is in.
package ipam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cipam "github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"

	"github.com/capo-net/capo/pkg/calico"
)

// Reader is the part of libcalico-go's IPAM client that says who holds
// an address.
type Reader interface {
	GetAssignmentAttributes(ctx context.Context, addr cnet.IP) (map[string]string, *string, error)
}

// HandleReader also reads a handle's addresses: the agent's reads.
type HandleReader interface {
	Reader
	IPsByHandle(ctx context.Context, handleID string) ([]cnet.IP, error)
}

// Who returns the allocation holding ip, or nil when it is free (no pool, no
// block, or no allocation). An address cooling in Calico's IP cooldown is
// a Holder with Cooling set and no handle: it will be free, and whoever
// holds it for a pod holds it for that pod still.
func Who(ctx context.Context, r Reader, ip netip.Addr) (*calico.Holder, error) {
	attrs, handle, err := r.GetAssignmentAttributes(ctx, cnet.IP{IP: net.IP(ip.AsSlice())})
	return holderOf(ip, attrs, handle, err)
}

// holderOf is the Holder a reader's answer for ip says.
func holderOf(ip netip.Addr, attrs map[string]string, handle *string, err error) (*calico.Holder, error) {
	if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		return nil, nil
	}
	if c := new(calico.CoolingError); errors.As(err, &c) {
		return &calico.Holder{Cooling: true, ReleasedAt: c.ReleasedAt}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading who holds %s: %w", ip, err)
	}
	if handle == nil && len(attrs) == 0 {
		// libcalico-go v3.31 (crd.projectcalico.org/v1, etcdv3) reads a
		// block of Calico 3.33+ without its releasedAt: an allocation that
		// points at no handle and no pod is how a cooling one reads there.
		// It is nobody's pod either way.
		return &calico.Holder{Cooling: true}, nil
	}
	h := &calico.Holder{Namespace: attrs[cipam.AttributeNamespace], Pod: attrs[cipam.AttributePod], Node: attrs[cipam.AttributeNode]}
	if handle != nil {
		h.Handle = *handle
	}
	return h, nil
}
