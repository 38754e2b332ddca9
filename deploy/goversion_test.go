package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Go version is stated once, in go.mod; the Dockerfile's build stage and
// the test tools modules follow it, toolchain line and all, so that every
// module the suite builds shares one toolchain and one build cache.
func TestOneGoVersion(t *testing.T) {
	root := filepath.Join(filepath.Dir(ChartDir()), "..", "..")
	line := func(path, directive string) string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^` + directive + ` (\S+)$`).FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s: no %s line", path, directive)
		}
		return string(m[1])
	}
	want := line(filepath.Join(root, "go.mod"), "go")
	wantToolchain := line(filepath.Join(root, "go.mod"), "toolchain")
	for _, mod := range []string{"test/tools", "test/tools/lint", "test/tools/calico-v3.30", "test/tools/vuln"} {
		path := filepath.Join(root, mod, "go.mod")
		if got := line(path, "go"); got != want {
			t.Errorf("%s/go.mod says go %s, go.mod says %s", mod, got, want)
		}
		if got := line(path, "toolchain"); got != wantToolchain {
			t.Errorf("%s/go.mod says toolchain %s, go.mod says %s", mod, got, wantToolchain)
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
