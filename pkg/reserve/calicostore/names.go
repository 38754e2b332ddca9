package calicostore

import (
	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/internal/layout"
)

// The names of capo's IPReservation objects: the store reads and writes
// them, and a reader of Calico (a test, the agent's probe, capoctl) finds
// an object by them. pkg/reserve decodes an object's place from its name
// with the same rules (pkg/reserve/internal/layout).

// BucketName is the name of a bucket's head (i = 0) or of its i-th
// overflow object.
func BucketName(bucket, i int) string { return layout.BucketName(bucket, i) }

// ParseBucketName is the inverse of BucketName: ok is false for any name
// BucketName does not give, a per-node object's included.
func ParseBucketName(name string) (bucket, i int, ok bool) { return layout.ParseBucketName(name) }

// LegacyName is the name of a node's i-th object in the per-node layout
// capo wrote before buckets.
func LegacyName(node string, i int) string { return layout.LegacyName(node, i) }

// EmptyHead is a bucket's head object holding nothing, as the store
// creates it: what the agent's probe writes where no head exists yet.
func EmptyHead(bucket int) *apiv3.IPReservation {
	o := reserve.NewBucketObject(bucket, 0).Object()
	res := apiv3.NewIPReservation()
	res.ObjectMeta = metav1.ObjectMeta{Name: o.Name, Labels: o.Labels, Annotations: o.Annotations}
	res.Spec.ReservedCIDRs = o.CIDRs
	return res
}
