package nodebed

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/capo-net/capo/test/testbed"
)

// The node's conflist is Calico's manifest rendered as install-cni renders
// it: byte for byte the manifest conflist capo's install tests use (there
// for node worker-1).
func TestCalicoConflistIsTheManifests(t *testing.T) {
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	got, err := CalicoConflist(root, "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(root, "install", "testdata", "calico-manifest.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
		t.Fatalf("rendered:\n%s\ninstall/testdata/calico-manifest.conflist:\n%s", got, want)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/run/netns/cni-1`: "/run/netns/cni-1", `/var/lib/a\040b`: "/var/lib/a b"} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
