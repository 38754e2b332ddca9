package layout

import (
	"fmt"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

// A release by hand marks the teardown it ended; the mark survives the
// object's encoding, keeps the object from being deleted, makes a Place
// of that teardown a refusal (by its sandbox, else its pod UID, on its
// node only), and expires after reserve.ReleasedByHandKept.
func TestReleaseByHandSticks(t *testing.T) {
	one := reserve.Entry{IP: "10.0.0.1", Node: "n1", Namespace: "ns", Pod: "db-0", PodUID: "uid-1", Sandbox: "sb1", Reason: reserve.ReasonCNIDel, ReservedAt: at}
	c := bucketWith(one)
	if got := c.ReleaseByHand(reserve.RefSet{one.Place(): true}, at.Add(time.Minute)); len(got) != 1 {
		t.Fatalf("released %v", got)
	}
	if len(c.Entries) != 0 || c.Retirable() {
		t.Fatalf("entries %v, retirable %v: the mark keeps the object", c.Entries, c.Retirable())
	}
	o := c.Object()
	if len(o.CIDRs) != 0 || o.Annotations[ReleasedAnnotation] == "" {
		t.Fatalf("written as %+v: no address held, the mark kept", o)
	}
	cases := []struct {
		name    string
		e       reserve.Entry
		refused bool
	}{
		{"the same sandbox", reserve.Entry{IP: "10.0.0.1", PodUID: "uid-1", Sandbox: "sb1"}, true},
		{"the same pod, its sandbox not known", reserve.Entry{IP: "10.0.0.1", PodUID: "uid-1"}, true},
		{"another sandbox of the pod", reserve.Entry{IP: "10.0.0.1", PodUID: "uid-1", Sandbox: "sb2"}, false},
		{"another pod", reserve.Entry{IP: "10.0.0.1", PodUID: "uid-2"}, false},
		{"another address", reserve.Entry{IP: "10.0.0.2", PodUID: "uid-1", Sandbox: "sb1"}, false},
		{"nothing known", reserve.Entry{IP: "10.0.0.1"}, false},
	}
	for _, tc := range cases {
		b := &Bucket{N: 3, Head: Decode(o)} // a Place adds what it takes to the object
		p, err := b.Place("n1", []reserve.Entry{tc.e}, reserve.DefaultLimits, false)
		if err != nil {
			t.Fatal(err)
		}
		if refused := len(p.Refused) == 1 && len(p.Added) == 0; refused != tc.refused {
			t.Errorf("%s: placement %+v, want refused %v", tc.name, p, tc.refused)
		}
	}
	b := &Bucket{N: 3, Head: Decode(o)}
	if p, _ := b.Place("n2", []reserve.Entry{{IP: "10.0.0.1", PodUID: "uid-1", Sandbox: "sb1"}}, reserve.DefaultLimits, false); len(p.Refused) != 0 {
		t.Errorf("another node's teardown refused: %+v", p)
	}
	if p, _ := (&Bucket{N: 3, Head: Decode(o)}).Place("n1", []reserve.Entry{{IP: "10.0.0.1", PodUID: "uid-1", Sandbox: "sb1"}}, reserve.DefaultLimits, true); len(p.Refused) != 0 {
		t.Errorf("the migration refused: %+v", p)
	}
	b = &Bucket{N: 3, Head: Decode(o)}
	if b.Head.Expirable(at.Add(time.Hour)) || b.Head.Expire(at.Add(time.Hour)) {
		t.Fatal("a mark an hour old expired")
	}
	b.Expire(at.Add(time.Minute + reserve.ReleasedByHandKept))
	if len(b.Head.Released) != 0 || !b.Head.Retirable() || b.Head.Object().Annotations[ReleasedAnnotation] != "" {
		t.Fatalf("expired marks kept: %v", b.Head.Released)
	}
}

// A mark is kept only for what names a teardown, and the oldest go past
// maxReleased; a plain Release leaves none, nor does a release by hand of
// an agent's hold while calico-node is replaced.
func TestReleaseMarks(t *testing.T) {
	hold := reserve.Entry{IP: "10.0.0.3", Node: "n1", Namespace: "ns", Pod: "db-0", PodUID: "u", Sandbox: "sb1", Reason: reserve.ReasonCNIRewrite, ReservedAt: at}
	c := bucketWith(reserve.Entry{IP: "10.0.0.1", Node: "n1"}, reserve.Entry{IP: "10.0.0.2", Node: "n1", PodUID: "u"}, hold)
	c.Release(reserve.RefSet{{Node: "n1", IP: "10.0.0.2"}: true})
	c.ReleaseByHand(reserve.RefSet{{Node: "n1", IP: "10.0.0.1"}: true, hold.Place(): true}, at)
	if len(c.Released) != 0 {
		t.Fatalf("marks %v: none of the releases names a teardown by hand", c.Released)
	}
	for i := range maxReleased + 5 {
		c.mark(reserve.Entry{IP: fmt.Sprintf("10.1.%d.%d", i/256, i%256), Node: "n1", PodUID: "u", Seen: at.Add(time.Duration(i) * time.Second)})
	}
	if len(c.Released) != maxReleased {
		t.Fatalf("%d marks kept, want %d", len(c.Released), maxReleased)
	}
	for _, m := range c.Released {
		if m.Seen.Before(at.Add(5 * time.Second)) {
			t.Fatalf("an oldest mark kept: %+v", m)
		}
	}
}
