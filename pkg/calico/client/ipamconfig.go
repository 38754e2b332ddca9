package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	libapiv3 "github.com/projectcalico/calico/libcalico-go/lib/apis/v3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/ipam"

	"github.com/capo-net/capo/pkg/calico/apigroup"
)

// ipamSettings is what capo reads of Calico's IPAMConfiguration "default".
type ipamSettings struct {
	StrictAffinity bool
	// Cooldown is ipCooldownSeconds (Calico 3.33+): how long a released
	// address stays unassignable.
	Cooldown time.Duration
}

// ipamConfiguration is the v3 CRD's object as far as capo reads it.
type ipamConfiguration struct {
	Spec struct {
		StrictAffinity    bool   `json:"strictAffinity"`
		IPCooldownSeconds *int64 `json:"ipCooldownSeconds"`
	} `json:"spec"`
}

// settings reads IPAMConfiguration "default". Absent, it is Calico's
// default (no strict affinity, no cooldown): calico-ipam creates it on its
// first assignment and reads the same defaults until then.
func (c *IPAM) settings(ctx context.Context) (*ipamSettings, error) {
	var o ipamConfiguration
	err := c.get(ctx, apigroup.IPAMConfiguration, "default", &o)
	if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		return &ipamSettings{}, nil
	}
	if err != nil {
		return nil, err
	}
	cfg := &ipamSettings{StrictAffinity: o.Spec.StrictAffinity}
	if s := o.Spec.IPCooldownSeconds; s != nil && *s > 0 {
		cfg.Cooldown = time.Duration(*s) * time.Second
	}
	return cfg, nil
}

// GetUtilization counts each pool's blocks as libcalico-go's does: every
// pool asked for (all when args names none), then, for all, the blocks of
// no pool as "orphaned allocation blocks".
func (c *IPAM) GetUtilization(ctx context.Context, args ipam.GetUtilizationArgs) ([]*ipam.PoolUtilization, error) {
	pools, err := c.Pools(ctx)
	if err != nil {
		return nil, err
	}
	var usage []*ipam.PoolUtilization
	for _, p := range pools {
		if len(args.Pools) > 0 && !wanted(args.Pools, p.Name, p.Spec.CIDR) {
			continue
		}
		_, n, err := net.ParseCIDR(p.Spec.CIDR)
		if err != nil {
			return nil, fmt.Errorf("IPPool %s has CIDR %q: %w", p.Name, p.Spec.CIDR, err)
		}
		usage = append(usage, &ipam.PoolUtilization{Name: p.Name, CIDR: *n})
	}
	if len(args.Pools) == 0 {
		_, all, _ := net.ParseCIDR("0.0.0.0/0")
		usage = append(usage, &ipam.PoolUtilization{Name: "orphaned allocation blocks", CIDR: *all})
	}
	var blocks libapiv3.IPAMBlockList
	if err := c.list(ctx, apigroup.IPAMBlock, &blocks); err != nil {
		return nil, err
	}
	for _, b := range blocks.Items {
		_, n, err := net.ParseCIDR(b.Spec.CIDR)
		if err != nil {
			return nil, fmt.Errorf("IPAMBlock %s has CIDR %q: %w", b.Name, b.Spec.CIDR, err)
		}
		for _, u := range usage {
			if u.CIDR.Contains(n.IP) || n.Contains(u.CIDR.IP) {
				u.Blocks = append(u.Blocks, ipam.BlockUtilization{CIDR: *n, Capacity: size(n), Available: len(b.Spec.Unallocated)})
				break
			}
		}
	}
	return usage, nil
}

// size is how many addresses n has (a block is far smaller than 2^31).
func size(n *net.IPNet) int {
	ones, bits := n.Mask.Size()
	return 1 << (bits - ones)
}

func wanted(names []string, name, cidr string) bool {
	for _, n := range names {
		if n == name || n == cidr {
			return true
		}
	}
	return false
}
