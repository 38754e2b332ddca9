package reserve

import (
	"strings"
	"testing"
	"time"
)

func TestSandboxRecordsRoundTripBesideOldOnes(t *testing.T) {
	with := Entry{
		IP: "10.0.0.1", Node: "n1", Namespace: "ns", Pod: "redis-3", PodUID: "u1", Reason: ReasonCNIDel,
		ReservedAt: time.Unix(100, 0).UTC(), OwnerKind: "StatefulSet", OwnerName: "redis", OwnerUID: "s1",
		Sandbox: SandboxOf("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
	}
	without := Entry{IP: "10.0.0.2", Node: "n1", Namespace: "ns", Pod: "redis-4", Reason: ReasonNodeLost, ReservedAt: time.Unix(100, 0).UTC()}
	c := NewBucketObject(3, 0)
	c.add(with)
	c.add(without)
	o := c.Object()
	text, err := unpack(strings.TrimPrefix(o.Annotations[MetadataAnnotation], packedV2))
	if err != nil || !strings.HasPrefix(text, textV3+recordSep) {
		t.Fatalf("with a sandbox the records are v3: %q %v", text, err)
	}
	back := Decode(o)
	if back.Err != nil || !back.Entries["10.0.0.1"].same(with) || !back.Entries["10.0.0.2"].same(without) {
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

func TestIsSandbox(t *testing.T) {
	e := Entry{Sandbox: SandboxOf("0123456789abcdef99")}
	for handle, want := range map[string]bool{
		"k8s-pod-network.0123456789abcdef99": true,
		"k8s-pod-network.0123456789abcdef00": true, // the same 16 digits: one sandbox
		"k8s-pod-network.1123456789abcdef99": false,
		"0123456789abcdef99":                 false,
	} {
		if got := e.IsSandbox(handle); got != want {
			t.Errorf("%s: %v, want %v", handle, got, want)
		}
	}
	if (Entry{}).IsSandbox("k8s-pod-network.") {
		t.Error("an entry without a sandbox matches no handle")
	}
}

// A pod that got its address back and lost it again before the controller
// ended the first reservation: the entry becomes the latest teardown's, so
// its sandbox and its age are right. A repeated DEL of one sandbox keeps
// the first timestamp.
func TestPlaceRenewsALaterTeardownOfTheSamePod(t *testing.T) {
	first := Entry{IP: "10.0.0.1", Namespace: "ns", Pod: "redis-3", PodUID: "u1", Reason: ReasonCNIDel, ReservedAt: time.Unix(100, 0), Sandbox: "aaaa"}
	seen := first
	seen.Node, seen.Seen = "n1", time.Unix(105, 0)
	b := Bucket{N: 0, Head: NewBucketObject(0, 0)}
	b.Head.add(seen)
	again := first
	again.ReservedAt = time.Unix(200, 0)
	p, err := b.Place("n1", []Entry{again}, DefaultLimits, false)
	if err != nil || len(p.Writes) != 0 || b.Head.Entries["10.0.0.1"].ReservedAt.Unix() != 100 {
		t.Fatalf("a repeated DEL of one sandbox must change nothing: %+v %v", p, err)
	}
	later := first
	later.PodUID, later.Sandbox, later.ReservedAt = "u2", "bbbb", time.Unix(300, 0)
	p, err = b.Place("n1", []Entry{later}, DefaultLimits, false)
	got := b.Head.Entries["10.0.0.1"]
	if err != nil || len(p.Writes) != 1 || len(p.Held) != 1 || got.Sandbox != "bbbb" || got.ReservedAt.Unix() != 300 || !got.Seen.IsZero() || got.PodUID != "u2" {
		t.Fatalf("a later sandbox's teardown must renew the entry: %+v %+v %v", p, got, err)
	}
	other := later
	other.Pod, other.Sandbox, other.ReservedAt = "web-1", "cccc", time.Unix(400, 0)
	if p, _ := b.Place("n1", []Entry{other}, DefaultLimits, false); len(p.Writes) != 0 || b.Head.Entries["10.0.0.1"].Pod != "redis-3" {
		t.Fatalf("another pod's teardown never takes over a reservation: %+v", b.Head.Entries)
	}
}

type recordedOwner struct {
	kind, name, uid string
	ok              bool
}

func (r recordedOwner) RecordedOwner() (kind, name, uid string, ok bool) {
	return r.kind, r.name, r.uid, r.ok
}

// SetOwner takes the controller recorded at ADD only for an entry that has
// none from its pod object, and only if one was recorded.
func TestSetOwner(t *testing.T) {
	var e Entry
	e.SetOwner(nil)
	e.SetOwner(recordedOwner{kind: "StatefulSet", name: "web", uid: "u1"})
	if e.OwnerKind != "" {
		t.Fatalf("an unrecorded owner was taken: %+v", e)
	}
	e.SetOwner(recordedOwner{kind: "StatefulSet", name: "web", uid: "u1", ok: true})
	if e.OwnerKind != "StatefulSet" || e.OwnerName != "web" || e.OwnerUID != "u1" {
		t.Fatalf("recorded owner not taken: %+v", e)
	}
	e.SetOwner(recordedOwner{kind: "StatefulSet", name: "db", uid: "u2", ok: true})
	if e.OwnerUID != "u1" {
		t.Fatalf("the pod object's owner was overwritten: %+v", e)
	}
}
