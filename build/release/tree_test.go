package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// make release builds only the tagged commit of a clean tree; the override
// builds anyway and says why it is not a release.
func TestCheckTreeRefusesDirtyOrUntagged(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("add", "a")
	run("commit", "-qm", "a")
	var warned []string
	warn := func(s string) { warned = append(warned, s) }

	if _, err := CheckTree(dir, "v1.0.0", false, warn); err == nil || !strings.Contains(err.Error(), "not tagged v1.0.0") || !strings.Contains(err.Error(), "ALLOW_UNTAGGED=1") {
		t.Errorf("untagged: %v", err)
	}
	run("tag", "v1.0.0")
	rev, err := CheckTree(dir, "v1.0.0", false, warn)
	if err != nil || len(rev) != 40 {
		t.Fatalf("clean and tagged: %q %v", rev, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b"), []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckTree(dir, "v1.0.0", false, warn); err == nil || !strings.Contains(err.Error(), "uncommitted or untracked") {
		t.Errorf("untracked file: %v", err)
	}
	if _, err := CheckTree(dir, "v1.0.1", true, warn); err != nil || len(warned) != 1 || !strings.Contains(warned[0], "not a release") {
		t.Errorf("override: %v, warned %q", err, warned)
	}
}
