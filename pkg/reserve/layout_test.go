package reserve

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestEntryRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	in := map[string]Entry{
		"10.0.0.9":  {IP: "10.0.0.9", Namespace: "kafka", Pod: "broker-1", PodUID: "u1", Reason: ReasonCNIDel, ReservedAt: at, OwnerKind: "StatefulSet", OwnerName: "broker", OwnerUID: "o1"},
		"10.0.0.10": {IP: "10.0.0.10", Reason: ReasonNodeLost, ReservedAt: at},
		"fd00::1":   {IP: "fd00::1", Namespace: "redis", Pod: "r-0", Reason: ReasonCNIDel, ReservedAt: at},
	}
	s := &shard{entries: in}
	cidrs, ann := s.encode()
	if strings.Join(cidrs, ",") != "10.0.0.9/32,10.0.0.10/32,fd00::1/128" {
		t.Fatalf("cidrs %v (want numeric order, v4 first)", cidrs)
	}
	if strings.ContainsAny(ann, `"\`) || !strings.HasPrefix(ann, packedV1) {
		t.Fatalf("annotation not packed, or would need JSON escaping: %s", ann)
	}
	if _, text := s.encodeText(); s.size() != len(text) {
		t.Fatalf("size %d, text %d", s.size(), len(text))
	}
	back, err := decodeShard("node-a", cidrs, ann)
	if err != nil {
		t.Fatal(err)
	}
	for ip, want := range in {
		want.Node = "node-a"
		if got := back.entries[ip]; got != want {
			t.Errorf("%s: got %+v want %+v", ip, got, want)
		}
	}
}

func TestDecodeShardCIDRsWin(t *testing.T) {
	ann := "v1;10.0.0.1|n|p|u|cni-del|100|||;10.0.0.2|n|q|u|cni-del|100|||"
	s, err := decodeShard("n1", []string{"10.0.0.1/32", "10.0.0.3/32", "10.1.0.0/24"}, ann)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.entries) != 3 || s.entries["10.0.0.1"].Pod != "p" || s.entries["10.0.0.3"].Pod != "" || s.entries["10.1.0.0/24"].IP != "10.1.0.0/24" {
		t.Fatalf("got %+v", s.entries)
	}
	if _, ok := s.entries["10.0.0.2"]; ok {
		t.Fatal("metadata without a CIDR must be dropped")
	}
	for _, bad := range []string{"v2;x", "v1;10.0.0.1|n", "v1;10.0.0.1|n|p|u|r|notanumber|||"} {
		if _, err := decodeShard("n", nil, bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestFitsHonoursBothLimits(t *testing.T) {
	e := Entry{IP: "10.0.0.1", Namespace: strings.Repeat("n", 63), Pod: strings.Repeat("p", 253), ReservedAt: time.Unix(1, 0)}
	s := &shard{entries: map[string]Entry{}}
	l := Limits{MaxIPs: 3, MaxAnnotationBytes: 1 << 20}
	for i := range 3 {
		if !s.fits(e, l, s.size()) {
			t.Fatalf("entry %d should fit", i)
		}
		e.IP = "10.0.0." + string(rune('1'+i))
		s.entries[e.IP] = e
	}
	if s.fits(e, l, s.size()) {
		t.Fatal("count limit ignored")
	}
	l = Limits{MaxIPs: 1000, MaxAnnotationBytes: s.size() + 10}
	if s.fits(e, l, s.size()) {
		t.Fatal("byte limit ignored")
	}
	// Worst-case entries spill into more shards, but not absurdly many.
	worst := len(e.encode()) + 1
	if DefaultLimits.MaxAnnotationBytes/worst < 200 {
		t.Fatalf("default budget holds only %d worst-case entries", DefaultLimits.MaxAnnotationBytes/worst)
	}
}

func TestShardName(t *testing.T) {
	if ShardName("node-a", 0) != "capo-node-a" || ShardName("node-a", 2) != "capo-node-a-s2" {
		t.Fatal(ShardName("node-a", 2))
	}
	long := strings.Repeat("a", 253)
	n0, n1 := ShardName(long, 0), ShardName(long+"b", 0)
	if len(ShardName(long, 99)) > 253 || n0 == n1 {
		t.Fatalf("long names: %d, distinct=%v", len(ShardName(long, 99)), n0 != n1)
	}
}

func TestPackedAnnotation(t *testing.T) {
	// 1000 reservations of one StatefulSet: the packed form is what Calico
	// carries on every ADD, so it must be far smaller than the text.
	s := &shard{entries: map[string]Entry{}}
	for i := range 1000 {
		ip := "10.1." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250)
		s.entries[ip] = Entry{IP: ip, Namespace: "kafka-prod", Pod: "broker-" + strconv.Itoa(i), PodUID: fmt.Sprintf("%08x-6a51-4c1e-9d3b-%012x", i*7919, i*104729),
			Reason: ReasonCNIDel, ReservedAt: time.Unix(1_763_000_000+int64(i), 0), OwnerKind: "StatefulSet", OwnerName: "broker", OwnerUID: "5b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"}
	}
	cidrs, ann := s.encode()
	if _, text := s.encodeText(); len(ann)*3 > len(text) {
		t.Fatalf("packed %d bytes from %d: want at least 3x smaller", len(ann), len(text))
	}
	back, err := decodeShard("n", cidrs, ann)
	if err != nil || len(back.entries) != 1000 || back.entries["10.1.2.7"].Pod != "broker-507" {
		t.Fatalf("round trip: %d entries, %v", len(back.entries), err)
	}
	for _, bad := range []string{"z1:!!!", "z1:" + base64.StdEncoding.EncodeToString([]byte("not deflate"))} {
		if _, err := decodeShard("n", nil, bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
	// Plain text written by hand (or by an older capo) still reads.
	if sh, err := decodeShard("n", []string{"10.0.0.1/32"}, "v1;10.0.0.1|a|b|c|cni-del|5|||"); err != nil || sh.entries["10.0.0.1"].Pod != "b" {
		t.Fatalf("plain: %v %v", sh, err)
	}
}
