// Package reserve is capo's reservation model: the entries, how they are
// laid out in Calico IPReservation objects, and how an object is encoded
// and filled. It does no I/O and imports nothing of Calico: calicostore
// reads and writes the objects, pkg/release plans over the entries.
//
// Calico lists every IPReservation on every automatic assignment on every
// node, so the number of objects must not grow with the cluster. Nodes hash
// into a fixed number of buckets; a bucket is one object, its head, which
// gains overflow objects only when full. A node's reservations all live in
// its bucket, so a node's batched teardowns are one write, and one node's
// entries are one bucket to read. Empty objects are deleted.
package reserve

import (
	"hash/fnv"

	"github.com/capo-net/capo/pkg/reserve/internal/layout"
)

const (
	// MetadataAnnotation holds one record per reserved address.
	MetadataAnnotation = "capo.io/reservations"
	// OverflowAnnotation on a bucket's head lists the numbers of its
	// overflow objects, so a bucket is read without listing every object.
	OverflowAnnotation = "capo.io/overflow"
	// BucketLabel marks a bucket object with its bucket's number.
	BucketLabel = "capo.io/bucket"
	// LegacyNodeKey names the node of an object in the per-node layout
	// capo wrote before buckets: a label (shortened past 63 characters) and
	// an annotation (whole). Not the node opt-in label of pkg/selection.
	LegacyNodeKey = "capo.io/node"
	// ManagedByLabel marks capo's objects; others are never touched.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "capo"
)

// Buckets is how many buckets the nodes hash into: the number of objects
// Calico reads on every ADD while each holds fewer than Limits.MaxIPs.
// Changing it moves nodes to other buckets; keep it fixed.
const Buckets = layout.Buckets

// maxOverflow bounds a bucket's overflow objects, so a corrupt overflow
// list cannot send a reader through thousands of lookups.
const maxOverflow = layout.MaxOverflow

// Limits bound one object. On the Kubernetes datastore libcalico-go stores
// annotations again inside its own metadata annotation, and the API server
// caps annotations at 256 KiB per object: stay well under.
type Limits struct {
	MaxIPs             int
	MaxAnnotationBytes int
}

// DefaultLimits keeps the worst case under the cap: 160 KiB of text packs to
// at most about 214 KiB even if it did not compress at all.
var DefaultLimits = Limits{MaxIPs: 1000, MaxAnnotationBytes: 160 << 10}

// BucketOf is the bucket holding a node's reservations.
func BucketOf(node string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	return int(h.Sum32() % Buckets)
}
