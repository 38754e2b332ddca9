package layout

import (
	"fmt"
	"strings"
	"testing"
)

func TestBucketNames(t *testing.T) {
	for b := range Buckets {
		for _, i := range []int{0, 1, 12, MaxOverflow} {
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
