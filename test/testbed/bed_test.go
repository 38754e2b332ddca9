package testbed

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
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

// TestKubeControllersSideBySide runs two kube-controllers on the machine at
// once, as two beds' tests (make test's shards) or a test of both
// datastores do: each must keep running, its IPAM GC with it.
func TestKubeControllersSideBySide(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root; run as part of the end-to-end suite")
	}
	b, err := Start(context.Background(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	var ks []*KubeControllers
	for _, ds := range Datastores {
		k := b.StartKubeControllers(t, ds, 5*time.Second)
		defer k.Stop()
		ks = append(ks, k)
	}
	time.Sleep(5 * time.Second) // each has listened on whatever it listens on
	for i, k := range ks {
		if k.proc.exited() {
			out, _ := os.ReadFile(k.log)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Errorf("%s's kube-controllers exited beside the other; its last line: %s", Datastores[i], lines[len(lines)-1])
		}
	}
}
