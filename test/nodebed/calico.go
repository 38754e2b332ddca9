package nodebed

import (
	"context"
	"fmt"
	"net"
	"testing"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	bapi "github.com/projectcalico/calico/libcalico-go/lib/backend/api"
	"github.com/projectcalico/calico/libcalico-go/lib/backend/model"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
)

// The bed's pod addresses, well away from the e2e bed's 10.128.0.0/10: the
// default pool for capo's own pods and anything unannotated, and small
// per-test pools carved from the rest. Every pool is a VXLAN pool for
// workloads only; the tunnel addresses have their own (TunnelPool).
const (
	PodCIDR     = "10.250.0.0/16"
	DefaultPool = "10.250.0.0/24"
)

func (b *Bed) createDefaultPool(ctx context.Context) error {
	return b.createPool(ctx, "realnode-default", DefaultPool, apiv3.Automatic)
}

func (b *Bed) createPool(ctx context.Context, name, cidr string, mode apiv3.AssignmentMode) error {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return err
	}
	ones, _ := n.Mask.Size()
	pool := &apiv3.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiv3.IPPoolSpec{
			CIDR: cidr, BlockSize: max(ones, 26), AssignmentMode: &mode,
			IPIPMode: apiv3.IPIPModeNever, VXLANMode: vxlanMode(), NodeSelector: "all()",
			AllowedUses: []apiv3.IPPoolAllowedUse{apiv3.IPPoolAllowedUseWorkload},
		},
	}
	if _, err := b.Calico.IPPools().Create(ctx, pool, options.SetOptions{}); err != nil {
		return fmt.Errorf("IP pool %s (%s): %w", name, cidr, err)
	}
	return nil
}

// NewPool adds a pool of 2^(32-prefix) addresses that only pods asking for
// it by name get (assignmentMode Manual; see Namespace). Removed after t.
func (b *Bed) NewPool(t testing.TB, prefix int) (name string, cidr *net.IPNet) {
	t.Helper()
	b.pools++
	name = fmt.Sprintf("realnode-%d", b.pools)
	cidr = &net.IPNet{IP: net.IPv4(10, 250, byte(b.pools), 0).To4(), Mask: net.CIDRMask(prefix, 32)}
	if err := b.createPool(context.Background(), name, cidr.String(), apiv3.Manual); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = b.Calico.IPPools().Delete(context.Background(), name, options.DeleteOptions{}) })
	return name, cidr
}

// Alloc is one allocated address as Calico IPAM records it.
type Alloc struct {
	Handle, Namespace, Pod string
}

// Allocations reads every allocation block and returns what holds each
// address inside cidr: the handle and the pod Calico noted.
func (b *Bed) Allocations(ctx context.Context, cidr *net.IPNet) (map[string]Alloc, error) {
	blocks, err := b.blocks(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]Alloc{}
	for _, blk := range blocks {
		for ord, idx := range blk.Allocations {
			ip := blk.OrdinalToIP(ord)
			if idx == nil || !cidr.Contains(ip.IP) {
				continue
			}
			attr := blk.Attributes[*idx]
			a := Alloc{Namespace: attr.AttrSecondary[model.IPAMBlockAttributeNamespace], Pod: attr.AttrSecondary[model.IPAMBlockAttributePod]}
			if attr.AttrPrimary != nil {
				a.Handle = *attr.AttrPrimary
			}
			out[ip.String()] = a
		}
	}
	return out, nil
}

// BlockHost is the node the allocation block holding ip is affine to:
// the node that assigns its addresses without borrowing.
func (b *Bed) BlockHost(ctx context.Context, ip string) (string, error) {
	blocks, err := b.blocks(ctx)
	if err != nil {
		return "", err
	}
	addr := net.ParseIP(ip)
	for _, blk := range blocks {
		if blk.CIDR.Contains(addr) {
			return blk.Host(), nil
		}
	}
	return "", fmt.Errorf("no allocation block holds %s", ip)
}

// blocks are Calico IPAM's allocation blocks, read from its datastore.
func (b *Bed) blocks(ctx context.Context) ([]*model.AllocationBlock, error) {
	bc, ok := b.Calico.(interface{ Backend() bapi.Client })
	if !ok {
		return nil, fmt.Errorf("the Calico client exposes no backend to read allocation blocks")
	}
	list, err := bc.Backend().List(ctx, model.BlockListOptions{}, "")
	if err != nil {
		return nil, fmt.Errorf("listing Calico's allocation blocks: %w", err)
	}
	out := make([]*model.AllocationBlock, 0, len(list.KVPairs))
	for _, kv := range list.KVPairs {
		blk, ok := kv.Value.(*model.AllocationBlock)
		if !ok {
			return nil, fmt.Errorf("allocation block %v holds a %T", kv.Key, kv.Value)
		}
		out = append(out, blk)
	}
	return out, nil
}

// StrictAffinity sets Calico's IPAMConfiguration strictAffinity (no node
// assigns from another node's block) until t ends, then puts the
// configuration back as it was.
func (b *Bed) StrictAffinity(t testing.TB, on bool) {
	t.Helper()
	ctx := context.Background()
	orig, err := b.Calico.IPAM().GetIPAMConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := *orig
	cfg.StrictAffinity = on
	if err := b.Calico.IPAM().SetIPAMConfig(ctx, cfg); err != nil {
		t.Fatalf("setting IPAMConfiguration strictAffinity %v: %v", on, err)
	}
	t.Cleanup(func() {
		if err := b.Calico.IPAM().SetIPAMConfig(ctx, *orig); err != nil {
			t.Errorf("restoring IPAMConfiguration %+v: %v", *orig, err)
		}
	})
}

// Reservations are capo's reservations for the node, by address.
func (b *Bed) Reservations(ctx context.Context) (map[string]reserve.Entry, error) {
	return b.ReservationsOn(ctx, b.NodeName)
}

// ReservationsOn are capo's reservations for the named node, by address.
func (b *Bed) ReservationsOn(ctx context.Context, node string) (map[string]reserve.Entry, error) {
	got, err := calicostore.New(b.Calico, reserve.DefaultLimits).ListNode(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("reading capo's reservations for %s: %w", node, err)
	}
	out := map[string]reserve.Entry{}
	for _, r := range got {
		out[r.IP] = r
	}
	return out, nil
}

// Reserved is every address Calico's own IPAM skips: the reservedCIDRs of
// all IPReservations, read as calico-ipam reads them, whoever wrote them.
func (b *Bed) Reserved(ctx context.Context) (map[string]bool, error) {
	list, err := b.Calico.IPReservations().List(ctx, options.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing IPReservations: %w", err)
	}
	out := map[string]bool{}
	for _, r := range list.Items {
		for _, c := range r.Spec.ReservedCIDRs {
			ip, n, err := net.ParseCIDR(c)
			if err != nil {
				ip = net.ParseIP(c)
			} else if ones, bits := n.Mask.Size(); ones != bits {
				return nil, fmt.Errorf("IPReservation %s holds the range %s; the bed expects single addresses", r.Name, c)
			}
			if ip != nil {
				out[ip.String()] = true
			}
		}
	}
	return out, nil
}

// DeleteReservations deletes IPReservations by name, so a test that found
// them left behind does not leave them to the next.
func (b *Bed) DeleteReservations(t testing.TB, names []string) {
	t.Helper()
	for _, n := range names {
		if _, err := b.Calico.IPReservations().Delete(context.Background(), n, options.DeleteOptions{}); err != nil {
			t.Errorf("deleting IPReservation %s: %v", n, err)
		}
	}
}

// vxlanMode is the pools' VXLAN mode in the bed's configuration.
func vxlanMode() apiv3.VXLANMode {
	if Unencapsulated {
		return apiv3.VXLANModeNever
	}
	return apiv3.VXLANModeAlways
}
