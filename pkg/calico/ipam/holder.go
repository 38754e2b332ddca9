// Package ipam answers the one question capo asks Calico IPAM besides
// a handle's addresses: who holds an address now.
package ipam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cipam "github.com/projectcalico/calico/libcalico-go/lib/ipam"
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
	// Cooling is an address Calico released into its IP cooldown
	// (IPAMConfiguration ipCooldownSeconds, Calico 3.33+): it is nobody's,
	// no handle holds it, and calico-ipam assigns it to no one, its old
	// pod included, until it has cooled; then it is free.
	Cooling    bool
	ReleasedAt time.Time // when it was released, for a cooling address
}

// CoolingError is a reader's answer for an address in Calico's IP
// cooldown: Calico keeps the allocation, marked released (releasedAt), and
// pointing at no handle, so that it is neither free nor anyone's.
type CoolingError struct {
	IP         string
	ReleasedAt time.Time
}

func (e *CoolingError) Error() string {
	return fmt.Sprintf("%s is cooling in Calico's IPAM since %s (ipCooldownSeconds): released, assigned to no one until it has cooled", e.IP, e.ReleasedAt.Format(time.RFC3339))
}

// Is reports whether h is the given pod's allocation.
func (h *Holder) Is(namespace, pod string) bool {
	return h != nil && h.Namespace == namespace && h.Pod == pod
}

// Who returns the allocation holding ip, or nil when it is free (no pool, no
// block, or no allocation). An address cooling in Calico's IP cooldown is
// a Holder with Cooling set and no handle: it will be free, and whoever
// holds it for a pod holds it for that pod still.
func Who(ctx context.Context, r Reader, ip netip.Addr) (*Holder, error) {
	attrs, handle, err := r.GetAssignmentAttributes(ctx, cnet.IP{IP: net.IP(ip.AsSlice())})
	return holderOf(ip, attrs, handle, err)
}

// holderOf is the Holder a reader's answer for ip says.
func holderOf(ip netip.Addr, attrs map[string]string, handle *string, err error) (*Holder, error) {
	if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		return nil, nil
	}
	if c := new(CoolingError); errors.As(err, &c) {
		return &Holder{Cooling: true, ReleasedAt: c.ReleasedAt}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading who holds %s: %w", ip, err)
	}
	if handle == nil && len(attrs) == 0 {
		// libcalico-go v3.31 (crd.projectcalico.org/v1, etcdv3) reads a
		// block of Calico 3.33+ without its releasedAt: an allocation that
		// points at no handle and no pod is how a cooling one reads there.
		// It is nobody's pod either way.
		return &Holder{Cooling: true}, nil
	}
	h := &Holder{Namespace: attrs[cipam.AttributeNamespace], Pod: attrs[cipam.AttributePod], Node: attrs[cipam.AttributeNode]}
	if handle != nil {
		h.Handle = *handle
	}
	return h, nil
}
