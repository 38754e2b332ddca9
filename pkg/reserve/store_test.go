package reserve

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve/internal/layout"
)

func TestCollectMergesCopiesAndSkipsUnreadable(t *testing.T) {
	legacy := Decode(Object{Name: layout.LegacyName("n1", 0), Annotations: map[string]string{
		LegacyNodeKey:      "n1",
		MetadataAnnotation: "v1;10.0.0.1|ns|old|u|cni-del|100|||",
	}, CIDRs: []string{"10.0.0.1/32"}})
	bucket := bucketWith(
		Entry{IP: "10.0.0.1", Node: "n1", Pod: "new", ReservedAt: time.Unix(200, 0), Seen: time.Unix(300, 0)},
		Entry{IP: "fd00::1", Node: "n2", Pod: "v6", ReservedAt: time.Unix(50, 0)},
	)
	other := NewBucketObject(4, 0)
	other.add(Entry{IP: "10.0.0.1", Node: "n2", Pod: "n2-pod", ReservedAt: time.Unix(10, 0)})
	broken := bucketWith(Entry{IP: "10.9.9.9"})
	broken.Name, broken.Err = layout.BucketName(5, 0), errors.New("bad annotation")
	l := Collect([]*Contents{bucket, broken, legacy, other})
	var got []string
	for _, e := range l.Entries {
		got = append(got, fmt.Sprintf("%s@%s:%s:%d:%d", e.IP, e.Node, e.Pod, e.ReservedAt.Unix(), e.Seen.Unix()))
	}
	want := fmt.Sprint([]string{"10.0.0.1@n1:old:100:300", "10.0.0.1@n2:n2-pod:10:" + fmt.Sprint(time.Time{}.Unix())})
	if fmt.Sprint(got[:2]) != want || len(got) != 3 {
		t.Fatalf("entries %v\nwant %s and fd00::1", got, want)
	}
	if len(l.Unreadable) != 1 || l.Unreadable[0].Object != layout.BucketName(5, 0) || l.Unreadable[0].Addresses != 1 || l.Legacy != 1 {
		t.Fatalf("unreadable %+v legacy %d", l.Unreadable, l.Legacy)
	}
}

func TestReleaseStampAndRetire(t *testing.T) {
	c := bucketWith(Entry{IP: "10.0.0.1", Node: "n1", ReservedAt: at}, Entry{IP: "10.0.0.2", Node: "n2", ReservedAt: at})
	refs, err := NewRefSet([]Ref{{Node: "n1", IP: "10.0.0.1/32"}, {Node: "n1", IP: "10.0.0.2"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Release(refs); len(got) != 1 || got[0] != (Ref{Node: "n1", IP: "10.0.0.1"}) {
		t.Fatalf("released %v (10.0.0.2 is held for n2)", got)
	}
	if c.Retirable() {
		t.Fatal("retirable while it holds 10.0.0.2")
	}
	n2 := RefSet{{Node: "n2", IP: "10.0.0.2"}: true}
	if !c.Stamp(n2, at.Add(90*time.Second)) || c.Stamp(n2, at.Add(time.Hour)) || !c.Entries["10.0.0.2"].Seen.Equal(at.Add(90*time.Second)) {
		t.Fatalf("stamp: %+v (the first stamp stays)", c.Entries)
	}
	c.Release(n2)
	c.Relist(1)
	if c.Retirable() {
		t.Fatal("a head that lists overflow objects is not retirable")
	}
	c.Unlist(1)
	if !c.Retirable() {
		t.Fatal("empty and unlisted: retirable")
	}
	if _, err := NewRefSet([]Ref{{Node: "n1", IP: "10.0.0.300"}}); err == nil {
		t.Fatal("a bad address must be an error, not a release that matches nothing")
	}
}
