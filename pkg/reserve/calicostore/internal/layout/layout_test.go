package layout

import (
	"fmt"
	"testing"
)

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
