package ipam

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
)

// store is calico-ipam's objects in memory; failing blocks read with err.
type store struct {
	handles map[string][]netip.Prefix
	blocks  map[netip.Prefix]*Block
	pools   []apiv3.IPPool
	failing map[netip.Prefix]error
}

func (s *store) HandleBlocks(_ context.Context, h string) ([]netip.Prefix, error) {
	b, ok := s.handles[h]
	if !ok {
		return nil, cerrors.ErrorResourceDoesNotExist{Identifier: h}
	}
	return b, nil
}

func (s *store) Block(_ context.Context, cidr netip.Prefix) (*Block, error) {
	if err := s.failing[cidr]; err != nil {
		return nil, err
	}
	b, ok := s.blocks[cidr]
	if !ok {
		return nil, cerrors.ErrorResourceDoesNotExist{Identifier: cidr.String()}
	}
	return b, nil
}

func (s *store) Pools(context.Context) ([]apiv3.IPPool, error) { return s.pools, nil }

func ptr[T any](v T) *T { return &v }

func twoBlocks() *store {
	b1, b2, gone := netip.MustParsePrefix("10.0.0.0/30"), netip.MustParsePrefix("fd00::/126"), netip.MustParsePrefix("10.0.0.8/30")
	h := "k8s-pod-network.c1"
	return &store{
		handles: map[string][]netip.Prefix{h: {b1, b2, gone}},
		blocks: map[netip.Prefix]*Block{
			// ordinal 1 carries the handle as host-local's migration once wrote it
			b1: {CIDR: b1, Allocations: []*int{nil, ptr(0), ptr(1), nil}, Attributes: []Attribute{{Handle: ptr(h + "\r\neth0")}, {Handle: ptr("other")}}},
			b2: {CIDR: b2, Allocations: []*int{nil, nil, nil, ptr(0)}, Attributes: []Attribute{{Handle: &h, Attrs: map[string]string{"pod": "db-0"}}}},
		},
	}
}

// A handle's addresses are read from every block it names: a block gone
// since holds nothing of it, a handle is compared as Calico compares it,
// and a block that cannot be read is an error, never "nothing there".
func TestIPsByHandleFailsOnAnUnreadableBlock(t *testing.T) {
	ctx := context.Background()
	s := twoBlocks()
	got, err := Reads{S: s}.IPsByHandle(ctx, "k8s-pod-network.c1")
	var strs []string
	for _, ip := range got {
		strs = append(strs, ip.String())
	}
	if err != nil || !slices.Equal(strs, []string{"10.0.0.1", "fd00::3"}) {
		t.Fatalf("IPsByHandle = %v, %v", strs, err)
	}
	s.failing = map[netip.Prefix]error{netip.MustParsePrefix("fd00::/126"): errors.New("the server is currently unable to handle the request")}
	if got, err := (Reads{S: s}).IPsByHandle(ctx, "k8s-pod-network.c1"); err == nil {
		t.Fatalf("an unreadable block read as %v", got)
	}
	if _, err := (Reads{S: s}).IPsByHandle(ctx, "k8s-pod-network.none"); !errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		t.Fatalf("unknown handle: %v", err)
	}
}

func TestAssignmentInReadsAsCalico(t *testing.T) {
	ctx := context.Background()
	r := Reads{S: twoBlocks()}
	b1 := netip.MustParsePrefix("10.0.0.0/30")
	if _, h, err := r.AssignmentIn(ctx, b1, netip.MustParseAddr("10.0.0.1")); err != nil || h == nil || *h != "k8s-pod-network.c1" {
		t.Fatalf("sanitized handle: %v %v", h, err)
	}
	if _, _, err := r.AssignmentIn(ctx, b1, netip.MustParseAddr("10.0.0.3")); !errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		t.Fatalf("free address: %v", err)
	}
	attrs, _, err := r.AssignmentIn(ctx, netip.MustParsePrefix("fd00::/126"), netip.MustParseAddr("fd00::3"))
	if err != nil || attrs["pod"] != "db-0" {
		t.Fatalf("v6: %v %v", attrs, err)
	}
	if _, _, err := r.GetAssignmentAttributes(ctx, cnet.IP{IP: net.ParseIP("10.0.0.1")}); !errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		t.Fatalf("no pool: %v", err)
	}
}
