package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Of govulncheck's findings only the reachable ones (a function in the
// trace) count; each must be recorded, or it fails the gate.
func TestGate(t *testing.T) {
	stream := `{"config":{"protocol_version":"v1.0.0"}}
{"osv":{"id":"GO-2026-0001"}}
{"finding":{"osv":"GO-2026-0001","fixed_version":"v1.2.3","trace":[{"module":"example.com/m","version":"v1.0.0","package":"example.com/m/p","function":"F"}]}}
{"finding":{"osv":"GO-2026-0002","fixed_version":"v2.0.0","trace":[{"module":"example.com/n","version":"v1.0.0"}]}}
{"finding":{"osv":"GO-2026-0003","trace":[{"module":"example.com/o","version":"v1.0.0","package":"example.com/o","function":"G"}]}}
`
	dir := t.TempDir()
	record := func(text string) string {
		p := filepath.Join(dir, "SECURITY.md")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := run(strings.NewReader(stream), record("nothing recorded")); err == nil || !strings.Contains(err.Error(), "2 reachable advisories") {
		t.Fatalf("unrecorded: %v", err)
	}
	if err := run(strings.NewReader(stream), record("| GO-2026-0003 | no fix |")); err == nil || !strings.Contains(err.Error(), "1 reachable") {
		t.Fatalf("a fixable one unrecorded: %v", err)
	}
	if err := run(strings.NewReader(stream), record("GO-2026-0001 past a pin; GO-2026-0003 no fix")); err != nil {
		t.Fatalf("all recorded (the unreachable GO-2026-0002 needs nothing): %v", err)
	}
}
