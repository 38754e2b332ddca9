package layout

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

var at = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// bucketWith is bucket 3's head holding es.
func bucketWith(es ...reserve.Entry) *Contents {
	c := NewBucketObject(3, 0)
	for _, e := range es {
		c.add(e)
	}
	return c
}

func TestObjectRoundTrip(t *testing.T) {
	in := []reserve.Entry{
		{IP: "10.0.0.9", Node: "node-a", Namespace: "kafka", Pod: "broker-1", PodUID: "u1", Reason: reserve.ReasonCNIDel, ReservedAt: at, Seen: at.Add(time.Second), OwnerKind: "StatefulSet", OwnerName: "broker", OwnerUID: "o1"},
		{IP: "10.0.0.10", Node: "node-b", Reason: reserve.ReasonNodeLost, ReservedAt: at, Seen: at.Add(-2 * time.Minute)}, // the agent's clock ahead
		{IP: "fd00::1", Node: "node-a", Namespace: "redis", Pod: "r-0", Reason: reserve.ReasonCNIDel, ReservedAt: at},
		{IP: "10.1.0.0/24"}, // added by hand: no node, no metadata
	}
	c := bucketWith(in...)
	c.Overflow = []int{1, 4}
	o := c.Object()
	if got := strings.Join(o.CIDRs, ","); got != "10.0.0.9/32,10.0.0.10/32,10.1.0.0/24,fd00::1/128" {
		t.Fatalf("cidrs %s (want numeric order, v4 first, the hand-added reserve.CIDR as it was)", got)
	}
	if ann := o.Annotations[MetadataAnnotation]; strings.ContainsAny(ann, `"\`) || !strings.HasPrefix(ann, packedV2) {
		t.Fatalf("annotation not packed, or would need JSON escaping: %s", ann)
	}
	if o.Labels[BucketLabel] != "03" || o.Labels[ManagedByLabel] != ManagedBy || o.Annotations[OverflowAnnotation] != "1,4" {
		t.Fatalf("labels %v annotations %v", o.Labels, o.Annotations)
	}
	back := Decode(o)
	if back.Err != nil || back.Bucket != 3 || back.Index != 0 || len(back.Entries) != len(in) || fmt.Sprint(back.Overflow) != "[1 4]" {
		t.Fatalf("decoded %+v", back)
	}
	for _, want := range in {
		if got := back.Entries[want.IP]; !same(got, want) {
			t.Errorf("%s: got %+v want %+v", want.IP, got, want)
		}
	}
	if back.size != c.size {
		t.Errorf("size %d after decoding, %d before", back.size, c.size)
	}
}

// readGolden reads an object as today's per-node layout wrote it.
func readGolden(t *testing.T, file string) Object {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Name          string
		Labels        map[string]string
		Annotations   map[string]string
		ReservedCIDRs []string
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	return Object{Name: o.Name, Labels: o.Labels, Annotations: o.Annotations, CIDRs: o.ReservedCIDRs}
}

func TestDecodeReadsThePerNodeLayout(t *testing.T) {
	packed := Decode(readGolden(t, "legacy-z1.json"))
	text := Decode(readGolden(t, "legacy-v1-s1.json"))
	for _, c := range []*Contents{packed, text} {
		if c.Err != nil || !c.Legacy() || c.Node != "worker-legacy" {
			t.Fatalf("%s: %+v", c.Name, c)
		}
	}
	if packed.Index != 0 || text.Index != 1 || len(packed.Entries) != 3 || len(text.Entries) != 1 {
		t.Fatalf("indices %d %d, entries %d %d", packed.Index, text.Index, len(packed.Entries), len(text.Entries))
	}
	e := packed.Entries["fd00:77::5"]
	want := reserve.Entry{
		IP: "fd00:77::5", Node: "worker-legacy", Namespace: "kafka", Pod: "broker-0", PodUID: "0b6f3c1e-1111-4c1e-9d3b-000000000001",
		Reason: reserve.ReasonCNIDel, ReservedAt: time.Date(2025, 11, 20, 9, 30, 0, 0, time.UTC), OwnerKind: "StatefulSet", OwnerName: "broker", OwnerUID: "5b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d",
	}
	if !same(e, want) {
		t.Fatalf("got %+v\nwant %+v", e, want)
	}
	// Rewritten (a release), it keeps the format its agents read.
	packed.Release(reserve.RefSet{{Node: "worker-legacy", IP: "10.77.0.9"}: true})
	o := packed.Object()
	if !strings.HasPrefix(o.Annotations[MetadataAnnotation], packedV1) || o.Annotations[LegacyNodeKey] != "worker-legacy" || len(o.CIDRs) != 2 {
		t.Fatalf("rewritten per-node object: %+v", o)
	}
	if again := Decode(o); !same(again.Entries["fd00:77::5"], want) {
		t.Fatalf("after a rewrite: %+v", again.Entries)
	}
}

func TestDecodeCIDRsWinAndCompareAsValues(t *testing.T) {
	ann := "v2;10.0.0.1|n1|ns|p|u|cni-del|100||||;10.0.0.2|n1|ns|q|u|cni-del|100||||;FD00::1|n1|ns|r|u|cni-del|100||||"
	c := Decode(Object{
		Name: BucketName(1, 0), Annotations: map[string]string{MetadataAnnotation: ann},
		CIDRs: []string{"10.0.0.1/32", "10.0.0.3", "fd00:0::1/128", "10.1.0.0/24"},
	})
	if c.Err != nil || len(c.Entries) != 4 {
		t.Fatalf("%v %+v", c.Err, c.Entries)
	}
	if c.Entries["10.0.0.1"].Pod != "p" || c.Entries["fd00::1"].Pod != "r" || c.Entries["10.0.0.3"].Pod != "" || c.Entries["10.1.0.0/24"].IP != "10.1.0.0/24" {
		t.Fatalf("got %+v", c.Entries)
	}
	if _, ok := c.Entries["10.0.0.2"]; ok {
		t.Fatal("metadata without a reserve.CIDR must be dropped")
	}
	if cidrs := strings.Join(c.Object().CIDRs, ","); cidrs != "10.0.0.1/32,10.0.0.3/32,10.1.0.0/24,fd00::1/128" {
		t.Fatalf("written back as %s", cidrs)
	}
}

func TestUnreadableObjectsAreNeverRewritten(t *testing.T) {
	for _, bad := range []string{
		"v3;x", "v1;10.0.0.1|n", "v2;10.0.0.1|n|ns|p|u|r|notanumber||||", "v2;10.0.0.1|n|ns|p|u|r||+5|||", "z1:!!!",
		"z2:" + base64.StdEncoding.EncodeToString([]byte("not deflate")),
	} {
		o := Object{Name: BucketName(2, 0), Annotations: map[string]string{MetadataAnnotation: bad, "other": "x"}, CIDRs: []string{"10.0.0.1/32", "FD00::1/128"}}
		c := Decode(o)
		if c.Err == nil || c.Writable() {
			t.Errorf("%q: want an unreadable object", bad)
			continue
		}
		if len(c.Entries) != 2 || c.Release(reserve.RefSet{{IP: "10.0.0.1"}: true}) != nil {
			t.Errorf("%q: its addresses count as held and stay: %+v", bad, c.Entries)
		}
		c.Relist(2)
		w := c.Object()
		if w.Annotations[MetadataAnnotation] != bad || strings.Join(w.CIDRs, ",") != "10.0.0.1/32,FD00::1/128" || w.Annotations[OverflowAnnotation] != "2" || w.Annotations["other"] != "x" {
			t.Errorf("%q: rewritten as %+v", bad, w)
		}
	}
	// A capo object of neither layout is left alone too.
	if c := Decode(Object{Name: "capo-stray", CIDRs: []string{"10.0.0.1/32"}}); c.Err == nil {
		t.Fatal("an object with no bucket name and no node must not be read as anyone's")
	}
}

func TestRetiredObjectHoldsNothing(t *testing.T) {
	c := bucketWith()
	c.Retired = true
	o := c.Object()
	if len(o.CIDRs) != 0 || o.Annotations[MetadataAnnotation] != retiredMark {
		t.Fatalf("%+v", o)
	}
	back := Decode(o)
	if !back.Retired || back.Writable() || back.Err != nil {
		t.Fatalf("%+v", back)
	}
	// Agents of the per-node layout fail on it (they journal) rather than write into it.
	if _, _, err := parseRecords("v1;" + retiredMark); err == nil {
		t.Fatal("want the v1 reader's error on unknown records")
	}
}

func TestFitsHonoursBothLimits(t *testing.T) {
	e := reserve.Entry{IP: "10.0.0.1", Node: "n", Namespace: strings.Repeat("n", 63), Pod: strings.Repeat("p", 253), ReservedAt: time.Unix(1, 0)}
	c := bucketWith()
	l := reserve.Limits{MaxIPs: 3, MaxAnnotationBytes: 1 << 20}
	for i := range 3 {
		if !c.fits(e, l) {
			t.Fatalf("entry %d should fit", i)
		}
		e.IP = "10.0.0." + strconv.Itoa(i+2)
		c.add(e)
	}
	if c.fits(e, l) {
		t.Fatal("count limit ignored")
	}
	l = reserve.Limits{MaxIPs: 1000, MaxAnnotationBytes: c.size + 10}
	if c.fits(e, l) {
		t.Fatal("byte limit ignored")
	}
	// Worst-case entries spill into more objects, but not absurdly many.
	e.Node, e.OwnerName = strings.Repeat("x", 253), strings.Repeat("o", 253)
	if worst := len(record(e)) + 1; reserve.DefaultLimits.MaxAnnotationBytes/worst < 150 {
		t.Fatalf("default budget holds only %d worst-case entries", reserve.DefaultLimits.MaxAnnotationBytes/worst)
	}
}

func TestPackedAnnotation(t *testing.T) {
	// 1000 reservations of one StatefulSet over 60 nodes: the packed form is
	// what Calico carries on every ADD, so it must be far smaller than text.
	c := bucketWith()
	var text []string
	for i := range 1000 {
		e := reserve.Entry{
			IP: "10.1." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250), Node: fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i%60, i%7), Namespace: "kafka-prod",
			Pod: "broker-" + strconv.Itoa(i), PodUID: fmt.Sprintf("%08x-6a51-4c1e-9d3b-%012x", i*7919, i*104729), Reason: reserve.ReasonCNIDel,
			ReservedAt: time.Unix(1_763_000_000+int64(i), 0), Seen: time.Unix(1_763_000_004+int64(i), 0), OwnerKind: "StatefulSet", OwnerName: "broker", OwnerUID: "5b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d",
		}
		c.add(e)
		text = append(text, record(e))
	}
	o := c.Object()
	ann := o.Annotations[MetadataAnnotation]
	if n := len(strings.Join(text, recordSep)); len(ann)*3 > n {
		t.Fatalf("packed %d bytes from %d: want at least 3x smaller", len(ann), n)
	}
	t.Logf("1000 entries: %d bytes packed, %d per entry", len(ann), len(ann)/1000)
	back := Decode(o)
	if back.Err != nil || len(back.Entries) != 1000 || back.Entries["10.1.2.7"].Pod != "broker-507" {
		t.Fatalf("round trip: %d entries, %v", len(back.Entries), back.Err)
	}
}
