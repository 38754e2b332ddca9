package layout

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

func entries(ips ...string) []reserve.Entry {
	var out []reserve.Entry
	for _, ip := range ips {
		out = append(out, reserve.Entry{IP: ip, Namespace: "ns", Pod: "p-" + ip, Reason: reserve.ReasonCNIDel, ReservedAt: time.Unix(1000, 0)})
	}
	return out
}

// object is bucket 0's object i as read, holding ips for node n1 since an
// older time than any Reserve brings.
func object(i int, ips ...string) *Contents {
	c := NewBucketObject(0, i)
	for _, e := range entries(ips...) {
		e.Node, e.ReservedAt = "n1", time.Unix(1, 0)
		c.add(e)
	}
	return c
}

func head(overflow []int, ips ...string) *Contents {
	c := object(0, ips...)
	c.Overflow = overflow
	return c
}

// writesOf is what each write holds: "+name" for a create, "name" for an
// update, then its addresses and the head's overflow list.
func writesOf(p *Placement) []string {
	var out []string
	for _, w := range p.Writes {
		s := w.Name
		if w.Create {
			s = "+" + s
		}
		ips := make([]string, 0, len(w.Entries))
		for _, e := range w.sorted() {
			ips = append(ips, e.IP)
		}
		out = append(out, fmt.Sprintf("%s%v%v", s, ips, w.Overflow))
	}
	return out
}

func TestPlace(t *testing.T) {
	l := reserve.Limits{MaxIPs: 2, MaxAnnotationBytes: 1 << 20}
	unreadable := object(0, "10.0.0.7")
	unreadable.Err = fmt.Errorf("bad")
	cases := []struct {
		name     string
		b        Bucket
		in       []reserve.Entry
		want     []string
		wantHeld []string
	}{
		{"first reservation creates the head", Bucket{}, entries("10.0.0.1"), []string{"+capo.bucket-00[10.0.0.1][]"}, nil},
		{
			"a new head lists the overflow it needs",
			Bucket{},
			entries("10.0.0.1", "10.0.0.2", "10.0.0.3"),
			[]string{"+capo.bucket-00[10.0.0.1 10.0.0.2][1]", "+capo.bucket-00.1[10.0.0.3][]"},
			nil,
		},
		{
			"fills the head, lists and creates an overflow object",
			Bucket{Head: head(nil, "10.0.0.1")},
			entries("10.0.0.2", "10.0.0.3"),
			[]string{"capo.bucket-00[10.0.0.1 10.0.0.2][1]", "+capo.bucket-00.1[10.0.0.3][]"},
			nil,
		},
		{"held keeps the first record", Bucket{Head: head(nil, "10.0.0.1")}, entries("10.0.0.1"), nil, []string{"10.0.0.1"}},
		{"held as another spelling", Bucket{Head: head(nil, "fd00::1")}, entries("FD00:0::1/128"), nil, []string{"fd00::1"}},
		{
			"held in an overflow object",
			Bucket{Head: head([]int{1}, "10.0.0.1", "10.0.0.2"), Overflow: []*Contents{object(1, "10.0.0.3")}},
			entries("10.0.0.3", "10.0.0.4"),
			[]string{"capo.bucket-00.1[10.0.0.3 10.0.0.4][]"},
			[]string{"10.0.0.3"},
		},
		{"duplicates in one request", Bucket{}, entries("10.0.0.5", "10.0.0.5"), []string{"+capo.bucket-00[10.0.0.5][]"}, []string{"10.0.0.5"}},
		{
			"room in the head is used first",
			Bucket{Head: head([]int{1}, "10.0.0.1"), Overflow: []*Contents{object(1, "10.0.0.2")}},
			entries("10.0.0.9"),
			[]string{"capo.bucket-00[10.0.0.1 10.0.0.9][1]"},
			nil,
		},
		{
			"a listed object that is missing is created again, unlisted numbers after",
			Bucket{Head: head([]int{1, 2}, "10.0.0.1", "10.0.0.2"), Overflow: []*Contents{object(1, "10.0.0.3", "10.0.0.4")}},
			entries("10.0.0.5", "10.0.0.6", "10.0.0.7"),
			[]string{"capo.bucket-00[10.0.0.1 10.0.0.2][1 2 3]", "+capo.bucket-00.2[10.0.0.5 10.0.0.6][]", "+capo.bucket-00.3[10.0.0.7][]"},
			nil,
		},
		{
			"an unreadable head is skipped but keeps the list",
			Bucket{Head: unreadable},
			entries("10.0.0.7", "10.0.0.8"),
			[]string{"capo.bucket-00[10.0.0.7][1]", "+capo.bucket-00.1[10.0.0.8][]"},
			[]string{"10.0.0.7"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hadObjects := tc.b.Head != nil
			p, err := tc.b.Place("n1", tc.in, l, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := writesOf(p); !slices.Equal(got, tc.want) {
				t.Errorf("writes\n %v\nwant\n %v", got, tc.want)
			}
			if !slices.Equal(p.Held, tc.wantHeld) {
				t.Errorf("held %v, want %v", p.Held, tc.wantHeld)
			}
			for _, w := range p.Writes {
				for _, e := range w.Entries {
					if hadObjects && slices.Contains(p.Held, e.IP) && !e.ReservedAt.Equal(time.Unix(1, 0)) && w.Err == nil {
						t.Errorf("%s: first timestamp replaced", e.IP)
					}
					if slices.Contains(p.Added, e.IP) && e.Node != "n1" {
						t.Errorf("%s: node not set", e.IP)
					}
				}
			}
		})
	}
}

// The migration brings older records: the older one wins, the newer's
// Seen is kept if the older has none.
func TestPlaceRefreshKeepsTheFirstTimestamp(t *testing.T) {
	h := head(nil)
	newer := reserve.Entry{IP: "10.0.0.1", Node: "n1", Pod: "new", ReservedAt: time.Unix(500, 0), Seen: time.Unix(600, 0)}
	h.add(newer)
	b := Bucket{Head: h}
	older := reserve.Entry{IP: "10.0.0.1", Pod: "old", ReservedAt: time.Unix(100, 0)}
	p, err := b.Place("n1", []reserve.Entry{older}, reserve.DefaultLimits, true)
	if err != nil || len(p.Writes) != 1 {
		t.Fatalf("%+v %v", p, err)
	}
	got := h.Entries["10.0.0.1"]
	if got.Pod != "old" || got.ReservedAt.Unix() != 100 || got.Seen.Unix() != 600 {
		t.Fatalf("merged %+v", got)
	}
	if p, _ := b.Place("n1", []reserve.Entry{older}, reserve.DefaultLimits, true); len(p.Writes) != 0 {
		t.Fatal("refreshing what is already merged must not write")
	}
}

func TestPlaceRejectsBadAddresses(t *testing.T) {
	b := Bucket{}
	if _, err := b.Place("n1", entries("10.0.0.1", "not-an-ip"), reserve.DefaultLimits, false); err == nil {
		t.Fatal("want an error")
	}
}

func TestPlaceBoundsOverflow(t *testing.T) {
	b := Bucket{Head: head(nil, "10.0.0.1")}
	l := reserve.Limits{MaxIPs: 1, MaxAnnotationBytes: 1 << 20}
	var many []string
	for i := range MaxOverflow + 1 {
		many = append(many, fmt.Sprintf("10.1.%d.%d", i/250, i%250))
	}
	if _, err := b.Place("n1", entries(many...), l, false); err == nil {
		t.Fatal("want an error past the overflow bound")
	}
}
