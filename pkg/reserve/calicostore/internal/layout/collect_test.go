package layout

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

func TestCollectMergesCopiesAndSkipsUnreadable(t *testing.T) {
	legacy := Decode(Object{Name: LegacyName("n1", 0), Annotations: map[string]string{
		LegacyNodeKey:      "n1",
		MetadataAnnotation: "v1;10.0.0.1|ns|old|u|cni-del|100|||",
	}, CIDRs: []string{"10.0.0.1/32"}})
	bucket := bucketWith(
		reserve.Entry{IP: "10.0.0.1", Node: "n1", Pod: "new", ReservedAt: time.Unix(200, 0), Seen: time.Unix(300, 0)},
		reserve.Entry{IP: "fd00::1", Node: "n2", Pod: "v6", ReservedAt: time.Unix(50, 0)},
	)
	other := NewBucketObject(4, 0)
	other.add(reserve.Entry{IP: "10.0.0.1", Node: "n2", Pod: "n2-pod", ReservedAt: time.Unix(10, 0)})
	broken := bucketWith(reserve.Entry{IP: "10.9.9.9"})
	broken.Name, broken.Err = BucketName(5, 0), errors.New("bad annotation")
	l := Collect([]*Contents{bucket, broken, legacy, other})
	var got []string
	for _, e := range l.Entries {
		got = append(got, fmt.Sprintf("%s@%s:%s:%d:%d", e.IP, e.Node, e.Pod, e.ReservedAt.Unix(), e.Seen.Unix()))
	}
	want := fmt.Sprint([]string{"10.0.0.1@n1:old:100:300", "10.0.0.1@n2:n2-pod:10:" + fmt.Sprint(time.Time{}.Unix())})
	if fmt.Sprint(got[:2]) != want || len(got) != 3 {
		t.Fatalf("entries %v\nwant %s and fd00::1", got, want)
	}
	if len(l.Unreadable) != 1 || l.Unreadable[0].Object != BucketName(5, 0) || l.Unreadable[0].Addresses != 1 || l.Legacy != 1 {
		t.Fatalf("unreadable %+v legacy %d", l.Unreadable, l.Legacy)
	}
}
