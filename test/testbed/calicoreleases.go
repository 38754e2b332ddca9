package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// CalicoReleases are the Calico releases whose CNI binaries the bed runs:
// the pinned one capo builds against, and the one before it, the only
// other release commit the Go module proxy serves. capo keeps one
// libcalico-go; only the calico and calico-ipam binaries differ.
var CalicoReleases = []string{PinnedCalico, PreviousCalico}

const (
	PinnedCalico   = "v3.31.0"
	PreviousCalico = "v3.30.1"
	// PreviousCalicoModule is the module under test/tools that pins it.
	PreviousCalicoModule = "calico-v3.30"
	// CalicoPkg is Calico's CNI plugin, calico and calico-ipam in one.
	CalicoPkg = "github.com/projectcalico/calico/cni-plugin/cmd/calico"
	// KubeControllersPkg is Calico's kube-controllers (test/tools pins it).
	KubeControllersPkg = "github.com/projectcalico/calico/kube-controllers/cmd/kube-controllers"
)

// extraBuilds are binaries a test asks for, built (or taken from the cache)
// on first use, from the small modules under test/tools.
type extraBuilds struct {
	mu   sync.Mutex
	done map[string]string // package -> binary
}

// toolBinary builds pkg from the module in test/tools/<module> ("" for
// test/tools), cached by that module's and capo's go.mod and go.sum.
func (b *Bed) toolBinary(module, pkg, name string) (string, error) {
	b.extra.mu.Lock()
	defer b.extra.mu.Unlock()
	if p, ok := b.extra.done[pkg]; ok {
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out, err := BuildTool(root, module, pkg, name, b.logf)
	if err != nil {
		return "", err
	}
	if b.extra.done == nil {
		b.extra.done = map[string]string{}
	}
	b.extra.done[pkg] = out
	return out, nil
}

// CalicoBinDir is a node's CNI bin dir with the given release's calico and
// calico-ipam, and this checkout's capo-ipam.
func (b *Bed) CalicoBinDir(release string) (string, error) {
	switch release {
	case "", PinnedCalico:
		return b.CNIBinDir, nil
	case CalicoFromEnv:
		return b.calicoFromEnvDir()
	case PreviousCalico:
	default:
		return "", fmt.Errorf("no Calico %s in the bed; it has %v", release, CalicoReleases)
	}
	calico, err := b.toolBinary(PreviousCalicoModule, CalicoPkg, "calico")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(b.Dir, "cni-bin-"+release)
	if _, err := os.Stat(filepath.Join(dir, "capo-ipam")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, src := range map[string]string{"calico": calico, "calico-ipam": calico, "capo-ipam": b.Bin.CapoIPAM, "capo-ipam-kube": b.Bin.CapoIPAMKube} {
		if err := copyFile(src, filepath.Join(dir, name), 0o755); err != nil {
			return "", err
		}
	}
	return dir, nil
}
