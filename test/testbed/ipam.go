package testbed

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	bapi "github.com/projectcalico/calico/libcalico-go/lib/backend/api"
	"github.com/projectcalico/calico/libcalico-go/lib/backend/model"
)

// IPAMState is what Calico IPAM holds for an env's pool: the addresses
// allocated under each handle, read from the allocation blocks themselves,
// and the per-handle counts from the handle objects.
type IPAMState struct {
	ByHandle     map[string][]string // handle -> sorted IPs, from the blocks
	HandleCounts map[string]int      // handle -> addresses, from the handle objects
}

// IPAMState reads the env's allocation blocks and handles from the datastore.
func (e *Env) IPAMState(ctx context.Context) (*IPAMState, error) {
	be, err := backend(e)
	if err != nil {
		return nil, err
	}
	st := &IPAMState{ByHandle: map[string][]string{}, HandleCounts: map[string]int{}}
	blocks, err := be.List(ctx, model.BlockListOptions{}, "")
	if err != nil {
		return nil, fmt.Errorf("listing blocks: %w", err)
	}
	var ours []string // block CIDRs inside the env's pool
	for _, kv := range blocks.KVPairs {
		b, ok := kv.Value.(*model.AllocationBlock)
		if !ok {
			return nil, fmt.Errorf("block %v: unexpected value %T", kv.Key, kv.Value)
		}
		if !e.Pool.Contains(b.CIDR.IP) && (e.Pool6 == nil || !e.Pool6.Contains(b.CIDR.IP)) {
			continue
		}
		ours = append(ours, b.CIDR.String())
		for ord, attrIdx := range b.Allocations {
			if attrIdx == nil {
				continue
			}
			h := "<no handle>"
			if a := b.Attributes[*attrIdx]; a.AttrPrimary != nil {
				h = *a.AttrPrimary
			}
			st.ByHandle[h] = append(st.ByHandle[h], b.OrdinalToIP(ord).String())
		}
	}
	handles, err := be.List(ctx, model.IPAMHandleListOptions{}, "")
	if err != nil {
		return nil, fmt.Errorf("listing handles: %w", err)
	}
	for _, kv := range handles.KVPairs {
		h, ok := kv.Value.(*model.IPAMHandle)
		key, keyOK := kv.Key.(model.IPAMHandleKey) // the value's ID is not stored on etcd
		if !ok || !keyOK {
			return nil, fmt.Errorf("handle %v: unexpected value %T", kv.Key, kv.Value)
		}
		id := key.HandleID
		for blockCIDR, n := range h.Block {
			if slices.Contains(ours, blockCIDR) && n > 0 {
				st.HandleCounts[id] += n
			}
		}
	}
	for h := range st.ByHandle {
		slices.Sort(st.ByHandle[h])
	}
	return st, nil
}

// Check reports inconsistencies: an address under two handles, or handle
// objects that disagree with the blocks (a leak or a lost allocation).
func (s *IPAMState) Check() error {
	var problems []string
	seen := map[string]string{}
	for h, ips := range s.ByHandle {
		for _, ip := range ips {
			if other, dup := seen[ip]; dup {
				problems = append(problems, fmt.Sprintf("%s allocated to both %s and %s", ip, other, h))
			}
			seen[ip] = h
		}
		if s.HandleCounts[h] != len(ips) {
			problems = append(problems, fmt.Sprintf("handle %s: blocks hold %d addresses, handle object says %d", h, len(ips), s.HandleCounts[h]))
		}
	}
	for h, n := range s.HandleCounts {
		if _, ok := s.ByHandle[h]; !ok {
			problems = append(problems, fmt.Sprintf("handle %s claims %d addresses the blocks do not hold", h, n))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("IPAM inconsistent: %s", strings.Join(problems, "; "))
	}
	return nil
}

// Allocated is the total number of allocated addresses.
func (s *IPAMState) Allocated() int {
	n := 0
	for _, ips := range s.ByHandle {
		n += len(ips)
	}
	return n
}

// Handle is Calico's IPAM handle for a sandbox.
func (s *Sandbox) Handle() string { return NetworkName + "." + s.ContainerID }

func backend(e *Env) (bapi.Client, error) {
	b, ok := e.Calico.(interface{ Backend() bapi.Client })
	if !ok {
		return nil, fmt.Errorf("calico client exposes no backend")
	}
	return b.Backend(), nil
}

// Free reports whether Calico IPAM considers ip unallocated.
func (e *Env) Free(ctx context.Context, ip net.IP) (bool, error) {
	st, err := e.IPAMState(ctx)
	if err != nil {
		return false, err
	}
	for _, ips := range st.ByHandle {
		if slices.Contains(ips, ip.String()) {
			return false, nil
		}
	}
	return true, nil
}

// Holder is the handle ip is allocated to, or "" when it is free.
func (s *IPAMState) Holder(ip net.IP) string {
	for h, ips := range s.ByHandle {
		if slices.Contains(ips, ip.String()) {
			return h
		}
	}
	return ""
}
