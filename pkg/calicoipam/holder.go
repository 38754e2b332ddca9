// Package calicoipam answers the one question capo asks Calico IPAM besides
// a handle's addresses: who holds an address now.
package calicoipam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
)

// Reader is the part of libcalico-go's IPAM client this needs.
type Reader interface {
	GetAssignmentAttributes(ctx context.Context, addr cnet.IP) (map[string]string, *string, error)
}

// Holder is the allocation an address belongs to.
type Holder struct {
	Handle    string
	Namespace string // the pod's, as the calico plugin recorded it
	Pod       string
	Node      string // where it was assigned, as calico-ipam recorded it ("node")
}

// Is reports whether h is the given pod's allocation.
func (h *Holder) Is(namespace, pod string) bool {
	return h != nil && h.Namespace == namespace && h.Pod == pod
}

// Who returns the allocation holding ip, or nil when it is free (no pool, no
// block, or no allocation).
func Who(ctx context.Context, r Reader, ip netip.Addr) (*Holder, error) {
	attrs, handle, err := r.GetAssignmentAttributes(ctx, cnet.IP{IP: net.IP(ip.AsSlice())})
	if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading who holds %s: %w", ip, err)
	}
	h := &Holder{Namespace: attrs[ipam.AttributeNamespace], Pod: attrs[ipam.AttributePod], Node: attrs[ipam.AttributeNode]}
	if handle != nil {
		h.Handle = *handle
	}
	return h, nil
}
