package ipam

import (
	"context"
	"net/netip"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"

	"github.com/capo-net/capo/pkg/calico"
)

type reader struct {
	attrs  map[string]string
	handle *string
	err    error
}

func (r reader) GetAssignmentAttributes(context.Context, cnet.IP) (map[string]string, *string, error) {
	return r.attrs, r.handle, r.err
}

// Who tells a pod's allocation, a free address and a cooling one apart,
// the cooling one as the v3 reader says it and as libcalico-go v3.31 reads
// a Calico 3.33+ block (an allocation with no handle and no attributes).
func TestWho(t *testing.T) {
	h := "k8s-pod-network.c1"
	ip := netip.MustParseAddr("10.0.0.1")
	at := time.Unix(1700000000, 0)
	for name, tc := range map[string]struct {
		r    reader
		want *calico.Holder
	}{
		"a pod's":       {reader{attrs: map[string]string{"namespace": "kafka", "pod": "kafka-0", "node": "n1"}, handle: &h}, &calico.Holder{Handle: h, Namespace: "kafka", Pod: "kafka-0", Node: "n1"}},
		"free":          {reader{err: cerrors.ErrorResourceDoesNotExist{Identifier: "10.0.0.1"}}, nil},
		"cooling (v3)":  {reader{err: &calico.CoolingError{IP: "10.0.0.1", ReleasedAt: at}}, &calico.Holder{Cooling: true, ReleasedAt: at}},
		"cooling (v1)":  {reader{}, &calico.Holder{Cooling: true}},
		"a handle only": {reader{handle: &h}, &calico.Holder{Handle: h}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Who(context.Background(), tc.r, ip)
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Fatalf("Who = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBlockOf(t *testing.T) {
	pool := func(cidr string, size int, disabled bool) apiv3.IPPool {
		var p apiv3.IPPool
		p.Name, p.Spec.CIDR, p.Spec.BlockSize, p.Spec.Disabled = cidr, cidr, size, disabled
		return p
	}
	pools := []apiv3.IPPool{
		pool("10.1.0.0/16", 26, true), // disabled: its blocks still hold their addresses
		pool("10.0.0.0/16", 28, false),
		pool("10.2.0.0/16", 0, false), // unset: Calico's default, /26
		pool("fd00::/64", 0, false),   // /122
		pool("not a CIDR", 26, false),
	}
	for _, tc := range []struct {
		ip, want string // want "": no block
	}{
		{"10.0.0.37", "10.0.0.32/28"},
		{"10.2.0.200", "10.2.0.192/26"},
		{"fd00::1:0:0:7f", "fd00::1:0:0:40/122"},
		{"::ffff:10.0.0.37", "10.0.0.32/28"},
		{"10.1.0.5", "10.1.0.0/26"},
		{"192.168.0.1", ""},
	} {
		b, ok := BlockOf(netip.MustParseAddr(tc.ip), pools)
		if got := map[bool]string{true: b.String(), false: ""}[ok]; got != tc.want {
			t.Errorf("BlockOf(%s) = %q, want %q", tc.ip, got, tc.want)
		}
	}
}
