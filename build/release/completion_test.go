package release

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/capo-net/capo/build/image"
)

// The krew archive's completion scripts are what this release's own
// kubectl-capo prints; a binary without the subcommand gives none, and
// the release says so instead of failing or shipping stale scripts.
func TestPluginCompletions(t *testing.T) {
	root, _ := filepath.Abs("../..")
	bin := filepath.Join(t.TempDir(), "capoctl")
	if err := image.GoBuildFor(context.Background(), root, "./cmd/capoctl", bin, runtime.GOOS, runtime.GOARCH, "-s -w"); err != nil {
		t.Fatal(err)
	}
	here := Platform{runtime.GOOS, runtime.GOARCH}
	var warned []string
	warn := func(s string) { warned = append(warned, s) }
	got := pluginCompletions(context.Background(), []builtCLI{{here, bin}}, t.TempDir(), warn)
	for _, sh := range Shells {
		if s := string(got["kubectl-capo."+sh]); !strings.Contains(s, "capo") {
			t.Errorf("%s script: %.200q (warnings %q)", sh, s, warned)
		}
	}

	noSub, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false(1)")
	}
	warned = nil
	if got := pluginCompletions(context.Background(), []builtCLI{{here, noSub}}, t.TempDir(), warn); got != nil || len(warned) != 1 || !strings.Contains(warned[0], "no completion scripts") {
		t.Errorf("a binary without completion: %v, warned %q", got, warned)
	}
	warned = nil
	if got := pluginCompletions(context.Background(), []builtCLI{{Platform{"plan9", "mips"}, noSub}}, t.TempDir(), warn); got != nil || len(warned) != 1 {
		t.Errorf("no binary for this machine: %v, warned %q", got, warned)
	}
}
