package client

import (
	"encoding/json"
	"fmt"
	"net/netip"

	libapiv3 "github.com/projectcalico/calico/libcalico-go/lib/apis/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/calico/ipam"
)

// block is an IPAMBlock with what libcalico-go v3.31's struct lacks: each
// attribute's releasedAt. Calico 3.33+ releases an allocation under
// ipCooldownSeconds by pointing its ordinal at a new attribute holding
// only releasedAt (no handle, no pod) until it has cooled; decoded into
// v3.31's struct alone, that reads as an allocation of handle "".
type block struct {
	libapiv3.IPAMBlock
	releasedAt []*metav1.Time // by attribute index
}

func (b *block) UnmarshalJSON(raw []byte) error {
	if err := json.Unmarshal(raw, &b.IPAMBlock); err != nil {
		return err
	}
	var extra struct {
		Spec struct {
			Attributes []struct {
				ReleasedAt *metav1.Time `json:"releasedAt"`
			} `json:"attributes"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &extra); err != nil {
		return err
	}
	b.releasedAt = b.releasedAt[:0]
	for _, a := range extra.Spec.Attributes {
		b.releasedAt = append(b.releasedAt, a.ReleasedAt)
	}
	return nil
}

// read is b as capo's IPAM reader takes it (ipam.Block).
func (b *block) read() (*ipam.Block, error) {
	cidr, err := netip.ParsePrefix(b.Spec.CIDR)
	if err != nil {
		return nil, fmt.Errorf("IPAMBlock %s has CIDR %q: %w", b.Name, b.Spec.CIDR, err)
	}
	out := &ipam.Block{CIDR: cidr, Allocations: b.Spec.Allocations, Attributes: make([]ipam.Attribute, len(b.Spec.Attributes))}
	for i, a := range b.Spec.Attributes {
		out.Attributes[i] = ipam.Attribute{Handle: a.AttrPrimary, Attrs: a.AttrSecondary}
		if i < len(b.releasedAt) && b.releasedAt[i] != nil {
			at := b.releasedAt[i].Time
			out.Attributes[i].ReleasedAt = &at
		}
	}
	return out, nil
}
