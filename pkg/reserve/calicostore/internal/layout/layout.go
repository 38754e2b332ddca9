// Package layout is how calicostore keeps capo's reservations in Calico
// IPReservation objects: the objects' names, labels and annotations, the
// records' encoding, and how a node's entries are placed in its bucket.
// It does no I/O: calicostore reads and writes the objects, and is the
// only package that can reach this one; it gives the rest of the module
// what an operator or a test must name (the objects' names, the
// annotation keys).
//
// Calico lists every IPReservation on every automatic assignment on every
// node, so the number of objects must not grow with the cluster. Nodes hash
// into a fixed number of buckets; a bucket is one object, its head, which
// gains overflow objects only when full. A node's reservations all live in
// its bucket, so a node's batched teardowns are one write, and one node's
// entries are one bucket to read. Empty objects are deleted.
package layout

import "hash/fnv"

const (
	// MetadataAnnotation holds one record per reserved address.
	MetadataAnnotation = "capo.io/reservations"
	// ReleasedAnnotation holds the teardowns released by hand from a
	// bucket object, which are not reserved again (released.go).
	ReleasedAnnotation = "capo.io/released"
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

// BucketOf is the bucket holding a node's reservations.
func BucketOf(node string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	return int(h.Sum32() % Buckets)
}
