package calicosuite

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// Built is what the harness builds before it enters its namespaces: there
// it has no network, so nothing may be fetched.
type Built struct {
	Suite             string // Calico's suite, hooked, compiled inside capo's module
	HostLocal         string // the host-local IPAM plugin some specs use
	ControllerManager string // kube-controller-manager: node CIDRs, foreground deletion
	Bin               *testbed.Binaries
	SuiteBuild        time.Duration // how long compiling the suite took
	// Baseline is where plain runs of these same inputs are kept
	// (baseline.go); Plain holds those found there, by datastore: the
	// inside half runs plain only on a datastore missing from it.
	Baseline string
	Plain    map[string]Run
}

// Build builds everything the runs need into dir, taking what it can from
// the test bed's cache; root is capo's module.
func Build(root, dir string, logf func(string, ...any)) (*Built, error) {
	b := &Built{Suite: filepath.Join(dir, "calico-cni.test")}
	var err error
	if b.Bin, err = testbed.BuildBinaries(root, dir, false, logf); err != nil {
		return nil, err
	}
	if b.ControllerManager, err = testbed.BuildControllerManager(root, logf); err != nil {
		return nil, err
	}
	if b.HostLocal, err = buildHostLocal(root, logf); err != nil {
		return nil, err
	}
	calico, err := moduleDir(root, "github.com/projectcalico/calico")
	if err != nil {
		return nil, err
	}
	overlay, err := WriteOverlay(root, calico, dir)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	// Inside capo's module: capo's build cache, Calico and Kubernetes at
	// capo's versions, and capo's installer for the hook.
	// -vet=off: the package is in the overlay only, where vet cannot go.
	if _, err := goCmd(root, "test", "-c", "-vet=off", "-trimpath", "-overlay="+overlay, "-o", b.Suite, SuitePackage); err != nil {
		return nil, err
	}
	b.SuiteBuild = time.Since(start)
	logf("calicosuite: compiled Calico's CNI suite in %s", b.SuiteBuild.Round(time.Second))
	return b, nil
}

// buildHostLocal builds containernetworking's host-local at the version
// capo's go.mod pins, cached beside the bed's calico (keyed alike).
func buildHostLocal(root string, logf func(string, ...any)) (string, error) {
	cache, err := testbed.CacheDir()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	out := filepath.Join(cache, "host-local-"+hex.EncodeToString(h.Sum(nil))[:12], "host-local")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	logf("calicosuite: building host-local (once; cached in %s)", filepath.Dir(out))
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.tmp%d", out, os.Getpid())
	if _, err := goCmd(root, "build", "-trimpath", "-o", tmp, "github.com/containernetworking/plugins/plugins/ipam/host-local"); err != nil {
		return "", err
	}
	return out, os.Rename(tmp, out)
}

// goCmd runs the go command in dir as the Makefile does (no cgo) and
// returns its output.
func goCmd(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return "", fmt.Errorf("go %v: %w\n%s", args, err, stderr)
	}
	return string(out), nil
}
