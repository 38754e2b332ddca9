package testbed

import (
	"os"
	"testing"
)

// TestServersBuilt builds the pinned etcd, kube-apiserver and calico into
// the cache and nothing else: `make demo` runs it first, under its own
// timeout, so the demo's clock starts once the minutes of a first build are
// behind it. Cached, it returns at once.
func TestServersBuilt(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := BuildBinaries(root, t.TempDir(), true, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{b.Etcd, b.KubeAPIServer, b.Calico} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s not built: %v", p, err)
		}
	}
}
