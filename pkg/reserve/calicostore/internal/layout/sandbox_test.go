package layout

import (
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

func TestSandboxRecordsRoundTripBesideOldOnes(t *testing.T) {
	with := reserve.Entry{
		IP: "10.0.0.1", Node: "n1", Namespace: "ns", Pod: "redis-3", PodUID: "u1", Reason: reserve.ReasonCNIDel,
		ReservedAt: time.Unix(100, 0).UTC(), OwnerKind: "StatefulSet", OwnerName: "redis", OwnerUID: "s1",
		Sandbox: reserve.SandboxOf("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
	}
	without := reserve.Entry{IP: "10.0.0.2", Node: "n1", Namespace: "ns", Pod: "redis-4", Reason: reserve.ReasonNodeLost, ReservedAt: time.Unix(100, 0).UTC()}
	c := NewBucketObject(3, 0)
	c.add(with)
	c.add(without)
	o := c.Object()
	text, err := unpack(strings.TrimPrefix(o.Annotations[MetadataAnnotation], packedV2))
	if err != nil || !strings.HasPrefix(text, textV3+recordSep) {
		t.Fatalf("with a sandbox the records are v3: %q %v", text, err)
	}
	back := Decode(o)
	if back.Err != nil || !same(back.Entries["10.0.0.1"], with) || !same(back.Entries["10.0.0.2"], without) {
		t.Fatalf("decoded %+v %v", back.Entries, back.Err)
	}
	if with.Sandbox != "0123456789abcdef" {
		t.Fatalf("sandbox kept as %q", with.Sandbox)
	}
	// Without any sandbox the object stays in v2, which older capo reads.
	c.remove("10.0.0.1")
	text, _ = unpack(strings.TrimPrefix(c.Object().Annotations[MetadataAnnotation], packedV2))
	if !strings.HasPrefix(text, textV2+recordSep) {
		t.Fatalf("no sandbox, yet written as %q", text)
	}
}

// A pod that got its address back and lost it again before the controller
// ended the first reservation: the entry becomes the latest teardown's, so
// its sandbox and its age are right. A repeated DEL of one sandbox keeps
// the first timestamp.
func TestPlaceRenewsALaterTeardownOfTheSamePod(t *testing.T) {
	first := reserve.Entry{IP: "10.0.0.1", Namespace: "ns", Pod: "redis-3", PodUID: "u1", Reason: reserve.ReasonCNIDel, ReservedAt: time.Unix(100, 0), Sandbox: "aaaa"}
	seen := first
	seen.Node, seen.Seen = "n1", time.Unix(105, 0)
	b := Bucket{N: 0, Head: NewBucketObject(0, 0)}
	b.Head.add(seen)
	again := first
	again.ReservedAt = time.Unix(200, 0)
	p, err := b.Place("n1", []reserve.Entry{again}, reserve.DefaultLimits, false)
	if err != nil || len(p.Writes) != 0 || b.Head.Entries["10.0.0.1"].ReservedAt.Unix() != 100 {
		t.Fatalf("a repeated DEL of one sandbox must change nothing: %+v %v", p, err)
	}
	later := first
	later.PodUID, later.Sandbox, later.ReservedAt = "u2", "bbbb", time.Unix(300, 0)
	p, err = b.Place("n1", []reserve.Entry{later}, reserve.DefaultLimits, false)
	got := b.Head.Entries["10.0.0.1"]
	if err != nil || len(p.Writes) != 1 || len(p.Held) != 1 || got.Sandbox != "bbbb" || got.ReservedAt.Unix() != 300 || !got.Seen.IsZero() || got.PodUID != "u2" {
		t.Fatalf("a later sandbox's teardown must renew the entry: %+v %+v %v", p, got, err)
	}
	other := later
	other.Pod, other.Sandbox, other.ReservedAt = "web-1", "cccc", time.Unix(400, 0)
	if p, _ := b.Place("n1", []reserve.Entry{other}, reserve.DefaultLimits, false); len(p.Writes) != 0 || b.Head.Entries["10.0.0.1"].Pod != "redis-3" {
		t.Fatalf("another pod's teardown never takes over a reservation: %+v", b.Head.Entries)
	}
}
