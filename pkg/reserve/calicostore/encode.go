package calicostore

import (
	"fmt"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore/internal/layout"
)

// The objects' encoding stays in internal/layout; what a reader or writer
// of Calico outside the store needs of it is here, on Calico's own type:
// the agent's probe writes an empty head, and the end-to-end tests make
// the objects an older capo or a cluster at scale would hold.

// EmptyHead is a bucket's head object holding nothing, as the store
// creates it: what the agent's probe writes where no head exists yet.
func EmptyHead(bucket int) *apiv3.IPReservation {
	o := layout.NewBucketObject(bucket, 0).Object()
	res := apiv3.NewIPReservation()
	res.ObjectMeta = metav1.ObjectMeta{Name: o.Name, Labels: o.Labels, Annotations: o.Annotations}
	res.Spec.ReservedCIDRs = o.CIDRs
	return res
}

// Entries is what a capo object holds, as the store reads it. An object
// that does not decode is an error, with the entries its CIDRs hold.
func Entries(res *apiv3.IPReservation) ([]reserve.Entry, error) {
	c := decode(res).c
	out := make([]reserve.Entry, 0, len(c.Entries))
	for _, e := range c.Entries {
		out = append(out, e)
	}
	reserve.SortEntries(out)
	if c.Err != nil {
		return out, fmt.Errorf("reservation object %s: %w", res.Name, c.Err)
	}
	return out, nil
}

// Rewrite makes res hold entries instead of what it holds, encoded as the
// store writes an object of its name: a bucket object's records, or, for
// an object of the per-node layout (annotated with its node), the format
// that layout's agents read. Labels and annotations capo does not own are
// kept. An entry replaces an earlier one of the same address. An object
// that does not decode, or is retired, is not rewritten.
func Rewrite(res *apiv3.IPReservation, entries []reserve.Entry) error {
	c := decode(res).c
	if !c.Writable() {
		return fmt.Errorf("reservation object %s is unreadable or retired: not rewritten (%v)", res.Name, c.Err)
	}
	clear(c.Entries)
	for _, e := range entries {
		addr, err := reserve.NormalizeAddr(e.IP)
		if err != nil {
			return fmt.Errorf("rewriting reservation object %s: %w", res.Name, err)
		}
		e.IP = addr
		c.Entries[addr] = e
	}
	o := c.Object()
	res.Labels, res.Annotations, res.Spec.ReservedCIDRs = o.Labels, o.Annotations, o.CIDRs
	return nil
}
