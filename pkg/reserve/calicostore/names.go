package calicostore

import "github.com/capo-net/capo/pkg/reserve/calicostore/internal/layout"

// The names, labels and annotations of capo's IPReservation objects: the
// store reads and writes them, and a reader of Calico (a test, the agent's
// probe, capoctl, an operator's message) finds an object by them. They are
// internal/layout's, which decodes an object's place from its name.

// The labels and annotations of capo's objects.
const (
	// MetadataAnnotation holds the object's records, one per address.
	MetadataAnnotation = layout.MetadataAnnotation
	// OverflowAnnotation on a bucket's head lists its overflow objects.
	OverflowAnnotation = layout.OverflowAnnotation
	// LegacyNodeKey names the node of an object in the per-node layout:
	// a label and an annotation.
	LegacyNodeKey = layout.LegacyNodeKey
	// ManagedByLabel set to ManagedBy marks capo's objects; others are
	// never touched.
	ManagedByLabel = layout.ManagedByLabel
	ManagedBy      = layout.ManagedBy
)

// BucketOf is the bucket holding a node's reservations.
func BucketOf(node string) int { return layout.BucketOf(node) }

// BucketName is the name of a bucket's head (i = 0) or of its i-th
// overflow object.
func BucketName(bucket, i int) string { return layout.BucketName(bucket, i) }

// ParseBucketName is the inverse of BucketName: ok is false for any name
// BucketName does not give, a per-node object's included.
func ParseBucketName(name string) (bucket, i int, ok bool) { return layout.ParseBucketName(name) }

// LegacyName is the name of a node's i-th object in the per-node layout
// capo wrote before buckets.
func LegacyName(node string, i int) string { return layout.LegacyName(node, i) }
