package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
)

// Shells are those the krew archive carries a completion script for.
var Shells = []string{"bash", "zsh", "fish"}

// pluginCompletions runs the built binary for this machine, named
// kubectl-capo so that its scripts complete `kubectl capo`, as
// `kubectl-capo completion SHELL`: the scripts are the binary's own, never
// a copy kept beside it that could drift. A binary without the subcommand,
// or a machine none of the platforms runs on, gives none, and says so.
func pluginCompletions(ctx context.Context, clis []builtCLI, dir string, warn func(string)) map[string][]byte {
	var bin string
	for _, c := range clis {
		if c.OS == runtime.GOOS && c.Arch == runtime.GOARCH {
			bin = c.path
		}
	}
	if bin == "" {
		warn(fmt.Sprintf("no kubectl-capo for %s/%s to print its completion scripts: the krew archives carry none", runtime.GOOS, runtime.GOARCH))
		return nil
	}
	data, err := os.ReadFile(bin)
	if err == nil {
		err = os.MkdirAll(dir, 0o750)
	}
	plugin := filepath.Join(dir, "kubectl-capo")
	if err == nil {
		err = os.WriteFile(plugin, data, 0o755) //nolint:gosec // run below
	}
	if err != nil {
		warn(fmt.Sprintf("completion scripts left out of the krew archives: %v", err))
		return nil
	}
	out := map[string][]byte{}
	for _, sh := range Shells {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		script, err := exec.CommandContext(ctx, plugin, "completion", sh).Output()
		cancel()
		if err != nil || len(script) == 0 {
			warn(fmt.Sprintf("kubectl-capo completion %s failed (%v): the krew archives carry no completion scripts", sh, err))
			return nil
		}
		out["kubectl-capo."+sh] = script
	}
	return out
}
