package reserve

import (
	"fmt"
	"strings"
	"testing"
)

func TestBucketNames(t *testing.T) {
	for b := range Buckets {
		for _, i := range []int{0, 1, 12, maxOverflow} {
			name := BucketName(b, i)
			gb, gi, ok := ParseBucketName(name)
			if !ok || gb != b || gi != i {
				t.Fatalf("%s parsed as %d %d %v", name, gb, gi, ok)
			}
		}
	}
	// No per-node name, whatever the node is called, reads as a bucket.
	for _, name := range []string{
		LegacyName("bucket-07", 0), LegacyName("capo.bucket-07", 1), "capo.bucket-7", "capo.bucket-07.0",
		"capo.bucket-07.01", fmt.Sprintf("capo.bucket-%02d", Buckets), "capo.bucket-07.x",
	} {
		if _, _, ok := ParseBucketName(name); ok {
			t.Errorf("%s read as a bucket object", name)
		}
	}
}

func TestLegacyName(t *testing.T) {
	if LegacyName("node-a", 0) != "capo-node-a" || LegacyName("node-a", 2) != "capo-node-a-s2" {
		t.Fatal(LegacyName("node-a", 2))
	}
	long := strings.Repeat("a", 253)
	if len(LegacyName(long, 99)) > 253 || LegacyName(long, 0) == LegacyName(long+"b", 0) {
		t.Fatal("long names")
	}
}

// Nodes spread evenly enough over the buckets that none holds far more
// than its share: 1000 nodes of typical names.
func TestBucketOfSpreadsNodes(t *testing.T) {
	for _, pattern := range []string{"node-%d", "ip-10-0-%d-17.ec2.internal", "worker-%04d"} {
		count := make([]int, Buckets)
		for i := range 1000 {
			count[BucketOf(fmt.Sprintf(pattern, i))]++
		}
		for b, n := range count {
			if share := 1000 / Buckets; n < share/2 || n > share*2 {
				t.Errorf("%s: bucket %d holds %d nodes of 1000 (share %d)", pattern, b, n, share)
			}
		}
	}
}
