package layout

import (
	"fmt"
	"strings"
	"testing"
)

// Pooled writers and readers give what fresh ones give, one call after
// another, whatever the previous call's input was.
func TestPackRoundTripsWithReusedCoders(t *testing.T) {
	texts := []string{"", strings.Repeat("10.0.0.1 kafka broker-0\n", 625), "x", strings.Repeat("fd00::7 db redis-3\n", 40)}
	for range 3 {
		for _, text := range texts {
			got, err := unpack(pack(text))
			if err != nil || got != text {
				t.Fatalf("round trip of %d bytes: got %d bytes, %v", len(text), len(got), err)
			}
		}
	}
	if _, err := unpack("bm90IGRlZmxhdGU="); err == nil {
		t.Fatal("garbage unpacked")
	}
	if got, err := unpack(pack("after garbage")); err != nil || got != "after garbage" {
		t.Fatalf("after a failed unpack: %q %v", got, err)
	}
}

// BenchmarkPack is one bucket's write and read, as a storm's writes and a
// pass's decodes pay them; -benchmem shows what each allocates.
func BenchmarkPack(b *testing.B) {
	var sb strings.Builder
	for i := range 625 {
		fmt.Fprintf(&sb, `{"ip":"10.1.%d.%d","ns":"kafka","pod":"broker-%d"}`+"\n", i>>8, i&255, i)
	}
	text := sb.String()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := unpack(pack(text)); err != nil {
			b.Fatal(err)
		}
	}
}
