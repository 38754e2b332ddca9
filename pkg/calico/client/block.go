package client

import (
	"encoding/json"

	libapiv3 "github.com/projectcalico/calico/libcalico-go/lib/apis/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// cooling is when the allocation at ordinal o was released into Calico's
// IP cooldown; nil when it was not.
func (b *block) cooling(o int) *metav1.Time {
	if o < 0 || o >= len(b.Spec.Allocations) || b.Spec.Allocations[o] == nil {
		return nil
	}
	if i := *b.Spec.Allocations[o]; i >= 0 && i < len(b.releasedAt) {
		return b.releasedAt[i]
	}
	return nil
}
