package reserve

import (
	"slices"
	"testing"
	"time"
)

func entries(ips ...string) []Entry {
	var out []Entry
	for _, ip := range ips {
		out = append(out, Entry{IP: ip, Namespace: "ns", Pod: "p-" + ip, Reason: ReasonCNIDel, ReservedAt: time.Unix(1000, 0)})
	}
	return out
}

func loaded(ips ...string) *object {
	sh := &shard{entries: map[string]Entry{}}
	for _, e := range entries(ips...) {
		e.ReservedAt = time.Unix(1, 0) // older than what a new Reserve brings
		sh.entries[e.IP] = e
	}
	return &object{shard: sh}
}

func TestPlace(t *testing.T) {
	l := Limits{MaxIPs: 2, MaxAnnotationBytes: 1 << 20}
	cases := []struct {
		name     string
		objs     []*object
		in       []Entry
		wantAdds [][]string // per object, after placement
		wantHeld []string
	}{
		{"first reservation creates shard 0", nil, entries("10.0.0.1"), [][]string{{"10.0.0.1"}}, nil},
		{"fills the first shard with room", []*object{loaded("10.0.0.1")}, entries("10.0.0.2", "10.0.0.3"), [][]string{{"10.0.0.2"}, {"10.0.0.3"}}, nil},
		{"held keeps first record", []*object{loaded("10.0.0.1")}, entries("10.0.0.1"), [][]string{nil}, []string{"10.0.0.1"}},
		{"held in a later shard", []*object{loaded("10.0.0.1", "10.0.0.2"), loaded("10.0.0.3")}, entries("10.0.0.3", "10.0.0.4"), [][]string{nil, {"10.0.0.4"}}, []string{"10.0.0.3"}},
		{"duplicates in one request", nil, entries("10.0.0.5", "10.0.0.5"), [][]string{{"10.0.0.5"}}, []string{"10.0.0.5"}},
		{"gap in an earlier shard is reused", []*object{loaded("10.0.0.1"), loaded("10.0.0.2", "10.0.0.3")}, entries("10.0.0.9"), [][]string{{"10.0.0.9"}, nil}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i, o := range tc.objs {
				o.index = i
			}
			objs, held := place("n1", tc.objs, tc.in, l)
			if len(objs) != len(tc.wantAdds) {
				t.Fatalf("%d objects, want %d", len(objs), len(tc.wantAdds))
			}
			for i, o := range objs {
				if o.index != i || !slices.Equal(o.adds, tc.wantAdds[i]) {
					t.Errorf("object %d: index %d adds %v, want %v", i, o.index, o.adds, tc.wantAdds[i])
				}
				if len(o.shard.entries) > l.MaxIPs {
					t.Errorf("object %d over the limit: %d", i, len(o.shard.entries))
				}
			}
			if !slices.Equal(held, tc.wantHeld) {
				t.Errorf("held %v, want %v", held, tc.wantHeld)
			}
			for _, o := range objs {
				for ip, e := range o.shard.entries {
					if slices.Contains(tc.wantHeld, ip) && e.ReservedAt.Unix() != 1 && len(tc.objs) > 0 {
						t.Errorf("%s: first timestamp replaced", ip)
					}
					if e.Node != "n1" && slices.Contains(o.adds, ip) {
						t.Errorf("%s: node not set", ip)
					}
				}
			}
		})
	}
}
