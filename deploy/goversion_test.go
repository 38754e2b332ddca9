package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Go version is stated once, in go.mod; the Dockerfile's build stage and
// the test tools modules follow it.
func TestOneGoVersion(t *testing.T) {
	root := filepath.Join(filepath.Dir(ChartDir()), "..", "..")
	goLine := func(path string) string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s: no go line", path)
		}
		return string(m[1])
	}
	want := goLine(filepath.Join(root, "go.mod"))
	for _, mod := range []string{"test/tools", "test/tools/lint", "test/tools/calico", "test/tools/calico-v3.30"} {
		if got := goLine(filepath.Join(root, mod, "go.mod")); got != want {
			t.Errorf("%s/go.mod says go %s, go.mod says %s", mod, got, want)
		}
	}
	docker, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)$`).FindSubmatch(docker)
	if m == nil {
		t.Fatal("Dockerfile has no ARG GO_VERSION=<version>")
	}
	if minor := strings.Join(strings.SplitN(want, ".", 3)[:2], "."); string(m[1]) != minor {
		t.Errorf("Dockerfile builds with Go %s, go.mod says %s (want GO_VERSION=%s)", m[1], want, minor)
	}
}
