package calicostore_test

import (
	"strings"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
)

// What Rewrite writes, Entries and the store read back, in the format the
// object's name says: packed records in a bucket object, the per-node
// layout's own in a per-node object.
func TestRewriteAndEntries(t *testing.T) {
	at := time.Unix(1_763_000_000, 0).UTC()
	es := []reserve.Entry{
		{IP: "10.0.0.2/32", Node: "n1", Namespace: "ns", Pod: "p-2", Reason: reserve.ReasonCNIDel, ReservedAt: at},
		{IP: "10.0.0.1", Node: "n1", Namespace: "ns", Pod: "p-1", Reason: reserve.ReasonCNIDel, ReservedAt: at},
	}
	bucket := apiv3.NewIPReservation()
	bucket.Name = calicostore.BucketName(calicostore.BucketOf("n1"), 0)
	legacy := apiv3.NewIPReservation()
	legacy.Name = calicostore.LegacyName("n1", 0)
	legacy.Annotations = map[string]string{calicostore.LegacyNodeKey: "n1", "keep": "me"}
	for res, prefix := range map[*apiv3.IPReservation]string{bucket: "z2:", legacy: "z1:"} {
		if err := calicostore.Rewrite(res, es); err != nil {
			t.Fatal(err)
		}
		if ann := res.Annotations[calicostore.MetadataAnnotation]; !strings.HasPrefix(ann, prefix) || res.Labels[calicostore.ManagedByLabel] != calicostore.ManagedBy {
			t.Fatalf("%s: annotation %.10q, labels %v; want %s records, managed by capo", res.Name, ann, res.Labels, prefix)
		}
		got, err := calicostore.Entries(res)
		if err != nil || len(got) != 2 || got[0].IP != "10.0.0.1" || got[1].Pod != "p-2" || got[1].Node != "n1" || !got[1].ReservedAt.Equal(at) {
			t.Fatalf("%s: read back %+v, %v", res.Name, got, err)
		}
	}
	if legacy.Annotations["keep"] != "me" {
		t.Fatal("an annotation capo does not own was dropped")
	}
	if err := calicostore.Rewrite(bucket, []reserve.Entry{{IP: "pod-a"}}); err == nil {
		t.Fatal("an entry whose address does not parse was written")
	}
	bucket.Annotations[calicostore.MetadataAnnotation] = "v9;?"
	if _, err := calicostore.Entries(bucket); err == nil {
		t.Fatal("an unreadable object read without an error")
	}
	if err := calicostore.Rewrite(bucket, es); err == nil || bucket.Annotations[calicostore.MetadataAnnotation] != "v9;?" {
		t.Fatalf("an unreadable object was rewritten: %v", err)
	}
}
