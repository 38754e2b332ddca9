package layout

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

// Every IPReservation capo reads may have been written by anyone with RBAC
// on the kind, or by an older or newer capo: decoding must never panic, and
// whatever decodes must encode back to the same entries.

// FuzzParseRecords: an annotation that decodes re-encodes to the same
// entries, and that encoding decodes again.
func FuzzParseRecords(f *testing.F) {
	f.Add("")
	f.Add(retiredMark)
	f.Add("v1;10.0.0.9|kafka|broker-1|u1|cni-del|1763000000|StatefulSet|broker|o1")
	f.Add("v2;10.0.0.9|node-a|kafka|broker-1|u1|cni-del|1763000000|+4|StatefulSet|broker|o1;10.1.0.0/24||||||||||")
	f.Add("v3;fd00::1|node-a|redis|r-0|u2|cni-del|1763000000|1763000009||||0123456789abcdef")
	f.Add("v2;10.0.0.10|node-b||||node-lost|1763000000|+-120|||")
	f.Add(encodeRecords([]reserve.Entry{{IP: "10.0.0.9", Node: "n", Pod: "p", ReservedAt: time.Unix(1_763_000_000, 0), Seen: time.Unix(1_763_000_004, 0), Sandbox: "abc"}}))
	f.Add(encodeV1([]reserve.Entry{{IP: "10.0.0.9", Pod: "p", ReservedAt: time.Unix(1_763_000_000, 0)}}))
	f.Add(packedV2 + "not base64!")
	f.Add(packedV2 + pack("v9;x"))
	f.Fuzz(func(t *testing.T, ann string) {
		entries, retired, err := parseRecords(ann)
		if err != nil {
			if entries != nil || retired {
				t.Fatalf("an error with a result: %v %v", entries, retired)
			}
			return
		}
		if retired {
			return
		}
		again, retired, err := parseRecords(encodeRecords(entries))
		if err != nil || retired {
			t.Fatalf("re-encoded %d entries do not decode: %v", len(entries), err)
		}
		sameEntries(t, entries, again)
	})
}

// FuzzEntryRoundTrip: any entry capo may write (its strings come from
// sockets, CNI_ARGS and API objects) is read back as written, and never
// makes the object holding it unreadable.
func FuzzEntryRoundTrip(f *testing.F) {
	f.Add("10.0.0.9", "node-a", "kafka", "broker-1", "u1", reserve.ReasonCNIDel, int64(1_763_000_000), int64(4), "StatefulSet", "broker", "o1", "0123456789abcdef")
	f.Add("fd00::1", "", "", "", "", reserve.ReasonNodeLost, int64(0), int64(0), "", "", "", "")
	f.Add("10.0.0.9", "n", "ns", "a|b", "u", reserve.ReasonCNIDel, int64(1), int64(-1), "", "", "", "c;d")
	f.Fuzz(func(t *testing.T, ip, node, ns, pod, uid, reason string, at, seen int64, kind, owner, ownerUID, sandbox string) {
		e := reserve.Entry{
			IP: ip, Node: node, Namespace: ns, Pod: pod, PodUID: uid, Reason: reason,
			OwnerKind: kind, OwnerName: owner, OwnerUID: ownerUID, Sandbox: sandbox,
		}
		if at != 0 {
			e.ReservedAt = time.Unix(at, 0).UTC()
		}
		if seen != 0 {
			e.Seen = time.Unix(seen, 0).UTC()
		}
		other := reserve.Entry{IP: "10.9.9.9", Node: "node-z", Pod: "other", ReservedAt: time.Unix(1_763_000_000, 0).UTC()}
		got, retired, err := parseRecords(encodeRecords([]reserve.Entry{e, other}))
		if err != nil || retired || len(got) != 2 {
			t.Fatalf("%+v does not read back: %d entries, %v", e, len(got), err)
		}
		if !same(got[1], other) {
			t.Fatalf("a neighbour changed: %+v", got[1])
		}
		if !separatorFree(e) {
			return // kept readable; the field itself cannot be kept as it was
		}
		sameEntries(t, []reserve.Entry{e}, got[:1])
	})
}

// FuzzDecodeObject: any object decodes without panicking; one that is
// readable renders to an object that decodes to the same contents, and
// rendering is stable.
func FuzzDecodeObject(f *testing.F) {
	packed := encodeRecords([]reserve.Entry{{IP: "10.0.0.9", Node: "node-a", Pod: "p", ReservedAt: time.Unix(1_763_000_000, 0)}})
	marks := encodeRecords([]reserve.Entry{{IP: "10.0.0.8", Node: "node-a", Pod: "p", PodUID: "u", Sandbox: "s", Seen: time.Unix(1_763_000_000, 0)}})
	f.Add("capo.bucket-03", packed, "1,4", "", "10.0.0.9/32,10.1.0.0/24", marks)
	f.Add("capo.bucket-15.7", "", "", "", "fd00::1/128", "")
	f.Add("capo-node-a", encodeV1([]reserve.Entry{{IP: "10.0.0.9", Pod: "p"}}), "", "node-a", "10.0.0.9/32", marks)
	f.Add("capo-node-a-s2", "v1;10.0.0.9|ns|p|u|cni-del|1|||", "", "node-a", "::ffff:10.0.0.9/128", "")
	f.Add("capo.bucket-03", retiredMark, "2", "", "", marks)
	f.Add("capo.bucket-99", "v2", "x,-1,1001", "", "not-an-ip", "v2;10.0.0.1||||||||||")
	// Objects as the per-node layout wrote them.
	goldens, _ := filepath.Glob("testdata/*.json")
	for _, file := range goldens {
		var o struct {
			Name          string
			Annotations   map[string]string
			ReservedCIDRs []string
		}
		if raw, err := os.ReadFile(file); err == nil && json.Unmarshal(raw, &o) == nil {
			f.Add(o.Name, o.Annotations[MetadataAnnotation], o.Annotations[OverflowAnnotation], o.Annotations[LegacyNodeKey], strings.Join(o.ReservedCIDRs, ","), o.Annotations[ReleasedAnnotation])
		}
	}
	f.Fuzz(func(t *testing.T, name, ann, overflow, node, cidrs, released string) {
		o := Object{Name: name, Annotations: map[string]string{MetadataAnnotation: ann, OverflowAnnotation: overflow, LegacyNodeKey: node, ReleasedAnnotation: released}}
		if cidrs != "" {
			o.CIDRs = strings.Split(cidrs, ",")
		}
		c := Decode(o)
		if c.Err != nil {
			if back := c.Object(); !reflect.DeepEqual(back.CIDRs, o.CIDRs) && len(o.CIDRs)+len(back.CIDRs) > 0 {
				t.Fatalf("an unreadable object's CIDRs were rewritten: %v -> %v", o.CIDRs, back.CIDRs)
			}
			return
		}
		out := c.Object()
		back := Decode(out)
		if back.Err != nil {
			t.Fatalf("rendered object does not decode: %v", back.Err)
		}
		if back.Retired != c.Retired || back.Bucket != c.Bucket || back.Index != c.Index || back.Node != c.Node || len(back.Entries) != len(c.Entries) {
			t.Fatalf("decoded %+v, rendered and decoded again %+v", c, back)
		}
		for addr, e := range c.Entries {
			if got, ok := back.Entries[addr]; !ok || !same(got, e) {
				t.Fatalf("%s: %+v became %+v", addr, e, got)
			}
		}
		if back.size != c.size {
			t.Fatalf("size %d after rendering, %d before", back.size, c.size)
		}
		if !reflect.DeepEqual(back.Released, c.Released) {
			t.Fatalf("releases by hand %v, rendered and decoded again %v", c.Released, back.Released)
		}
		if again := back.Object(); !reflect.DeepEqual(again, out) {
			t.Fatalf("rendering is not stable:\n%+v\n%+v", out, again)
		}
	})
}

// FuzzPack: packing round trips, and unpacking anything never panics.
func FuzzPack(f *testing.F) {
	f.Add("v2;10.0.0.9|node-a|kafka|broker-1|u1|cni-del|1763000000|+4|StatefulSet|broker|o1", "")
	f.Add("", "AAAA")
	f.Add("", pack("hello"))
	f.Fuzz(func(t *testing.T, text, packed string) {
		if got, err := unpack(pack(text)); err != nil || got != text {
			t.Fatalf("pack does not round trip: %q %v", got, err)
		}
		if got, err := unpack(packed); err == nil && pack(got) != "" {
			if back, err := unpack(pack(got)); err != nil || back != got {
				t.Fatalf("re-packed text does not round trip: %v", err)
			}
		} else if err != nil && got != "" {
			t.Fatalf("an error with a result: %q", got)
		}
	})
}

func fieldsOf(e reserve.Entry) []string {
	return []string{e.IP, e.Node, e.Namespace, e.Pod, e.PodUID, e.Reason, e.OwnerKind, e.OwnerName, e.OwnerUID, e.Sandbox}
}

func separatorFree(e reserve.Entry) bool {
	return !strings.ContainsAny(strings.Join(fieldsOf(e), ""), fieldSep+recordSep)
}

func sameEntries(t *testing.T, want, got []reserve.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if !same(got[i], want[i]) {
			t.Fatalf("entry %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}
