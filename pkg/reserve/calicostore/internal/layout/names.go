package layout

// The names of capo's objects: a bucket's head and its overflow objects,
// and the per-node objects capo wrote before buckets.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Buckets is how many buckets the nodes hash into: the number of objects
// Calico reads on every ADD while each holds fewer than Limits.MaxIPs.
// Changing it moves nodes to other buckets; keep it fixed.
const Buckets = 16

// MaxOverflow bounds a bucket's overflow objects, so a corrupt overflow
// list cannot send a reader through thousands of lookups.
const MaxOverflow = 1000

// BucketName is the name of a bucket's head (i = 0) or of its i-th
// overflow object. The dot keeps it apart from every per-node name,
// which is "capo-" and a node name.
func BucketName(bucket, i int) string {
	name := fmt.Sprintf("capo.bucket-%02d", bucket)
	if i > 0 {
		name += "." + strconv.Itoa(i)
	}
	return name
}

// ParseBucketName is the inverse of BucketName.
func ParseBucketName(name string) (bucket, i int, ok bool) {
	rest, ok := strings.CutPrefix(name, "capo.bucket-")
	if !ok {
		return 0, 0, false
	}
	b, idx, more := strings.Cut(rest, ".")
	bucket, err := strconv.Atoi(b)
	// Atoi takes a sign: "+3" and "-0" are not capo's names.
	if err != nil || bucket < 0 || bucket >= Buckets || fmt.Sprintf("%02d", bucket) != b {
		return 0, 0, false
	}
	if more {
		if i, err = strconv.Atoi(idx); err != nil || i < 1 || i > MaxOverflow || strconv.Itoa(i) != idx {
			return 0, 0, false
		}
	}
	return bucket, i, true
}

// LegacyName is the name of a node's i-th object in the per-node layout.
// Names past the 253-byte object name limit were shortened with a hash.
func LegacyName(node string, i int) string {
	name := "capo-" + node
	if len(name) > 230 {
		sum := sha256.Sum256([]byte(node))
		name = name[:200] + "-" + hex.EncodeToString(sum[:8])
	}
	if i > 0 {
		name += "-s" + strconv.Itoa(i)
	}
	return name
}
