package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Test binaries run in parallel (go test runs packages at once) and share
// the host network namespace, where Calico's routes and veths live. Each
// bed therefore claims a region: its env names and pool addresses are its
// own. The claim is a lock held for the bed's life; a dead bed's lock goes
// with its process.
const regions = 8

// envsPerRegion: each env owns a /24 in 10.<128+8r>.0.0/13.
const envsPerRegion = 8 * 256

func claimRegion() (int, *os.File, error) {
	for r := range regions {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("capo-testbed-region-%d.lock", r))
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return 0, nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			return r, f, nil
		}
		f.Close()
	}
	return 0, nil, fmt.Errorf("all %d test bed regions are taken: too many test binaries at once", regions)
}
