package layout

import (
	"strings"
	"testing"
)

// FuzzLayout: object names are read back from the datastore, where anyone
// with RBAC on IPReservations may have made one. A name that parses as a
// bucket object is exactly the name capo gives it; every node hashes into
// a bucket; per-node names stay within Kubernetes' 253 bytes.
func FuzzLayout(f *testing.F) {
	f.Add("capo.bucket-03", "worker-1", 0)
	f.Add("capo.bucket-15.1000", strings.Repeat("n", 300), 7)
	f.Add("capo.bucket-3", "", 1)
	f.Add("capo.bucket-03.01", "ip-10-0-1-2.ec2.internal", MaxOverflow)
	f.Add("capo.bucket-+3.+1", "x", -1)
	f.Fuzz(func(t *testing.T, name, node string, i int) {
		if b, idx, ok := ParseBucketName(name); ok {
			if b < 0 || b >= Buckets || idx < 0 || idx > MaxOverflow || BucketName(b, idx) != name {
				t.Fatalf("%q parses as bucket %d object %d, named %q", name, b, idx, BucketName(b, idx))
			}
		}
		if b := BucketOf(node); b < 0 || b >= Buckets {
			t.Fatalf("node %q in bucket %d", node, b)
		}
		if i < 0 || i > MaxOverflow {
			return
		}
		if b, idx, ok := ParseBucketName(BucketName(BucketOf(node), i)); !ok || b != BucketOf(node) || idx != i {
			t.Fatalf("bucket %d object %d does not parse back: %d %d %v", BucketOf(node), i, b, idx, ok)
		}
		legacy := LegacyName(node, i)
		if len(legacy) > 253 {
			t.Fatalf("per-node name of %d bytes", len(legacy))
		}
		if _, _, ok := ParseBucketName(legacy); ok {
			t.Fatalf("per-node name %q parses as a bucket object", legacy)
		}
	})
}
