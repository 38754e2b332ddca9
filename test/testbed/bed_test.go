package testbed

import (
	"context"
	"os"
	"testing"
)

// TestBedStarts brings the bed up and down once: `make testbins` uses it to
// build the cached servers, and it proves Stop leaves nothing running.
func TestBedStarts(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root; run as part of the end-to-end suite")
	}
	b, err := Start(context.Background(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	procs := append([]*proc(nil), b.procs...)
	b.Stop()
	for _, p := range procs {
		if !p.exited() {
			t.Errorf("%s still running after Stop", p.name)
		}
	}
	if _, err := os.Stat(b.Dir); !os.IsNotExist(err) {
		t.Errorf("%s left behind (err %v)", b.Dir, err)
	}
}
