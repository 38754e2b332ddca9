// Package capoctl is capoctl: it shows and ends capo's reservations,
// explains whether a pod's address would be reserved, says whether capo
// works on every node (status) and gathers a support bundle. Installed as
// kubectl-capo it is also `kubectl capo`, on kubectl's conventions: cobra
// commands, cli-runtime's kubeconfig flags and output printers.
package capoctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
)

// cli holds what every command needs.
type cli struct {
	ctx       context.Context
	kube      kubernetes.Interface
	store     reserve.Store
	calico    calicoInfo // nil in unit tests that need none
	exec      podExec    // nil where pods cannot be exec'd into
	capoNS    string
	in        io.Reader
	out, errw io.Writer
	now       time.Time
	cfg       *config.Config // read once, by config()
}

// clients are what a dialer reaches.
type clients struct {
	kube   kubernetes.Interface
	store  reserve.Store
	calico calicoInfo
	exec   podExec
}

// dialer reaches the Kubernetes API (for pods, nodes, the config) and the
// reservations; tests give fakes.
type dialer func(*kubeFlags) (*clients, error)

// usageError is a command line capoctl cannot run: exit code 2, as before
// capoctl was on cobra, and nothing is dialed.
type usageError struct{ error }

// Run runs one capoctl command line and returns its exit code. argv0 is the
// name it was run by: as kubectl-capo, its usage says `kubectl capo`.
func Run(argv0 string, args []string, in io.Reader, out, errw io.Writer) int {
	return run(args, in, out, errw, connect, time.Now(), Name(argv0))
}

// Name is how the user calls capoctl: `kubectl capo` for the plugin.
func Name(argv0 string) string {
	if strings.HasPrefix(filepath.Base(argv0), "kubectl-") {
		return "kubectl capo"
	}
	return "capoctl"
}

func run(args []string, in io.Reader, out, errw io.Writer, dial dialer, now time.Time, name string) int {
	root := newRoot(&app{dial: dial, in: in, out: out, errw: errw, now: now}, name)
	root.SetArgs(oldSpellings(root, args))
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errw)
	err := root.ExecuteContext(context.Background())
	if err == nil {
		return 0
	}
	var ex exitError
	if errors.As(err, &ex) {
		return ex.code
	}
	var ue usageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") || strings.HasPrefix(err.Error(), "unknown flag") {
		fmt.Fprintf(errw, "%s: %v\nSee '%s --help' for usage.\n", name, strings.TrimSpace(err.Error()), name)
		return 2
	}
	fmt.Fprintln(errw, err)
	return 1
}

// exitError ends a command with a code and no further message (status
// has printed what is wrong).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// oldSpellings rewrites -name and -name=value, as Go's flag package took
// them before capoctl was on cobra, to --name, for the long flags capoctl
// knows: scripts that say `-all` or `-node N` keep working. -n, -A, -o
// and -ojson are shorthands and stay as they are.
func oldSpellings(root *cobra.Command, args []string) []string {
	long := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { long[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { long[f.Name] = true })
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(name) > 1 && long[name] {
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}

// confirm asks on stdin; anything but y/yes is no.
func (c *cli) confirm(question string) bool {
	fmt.Fprintf(c.out, "%s [y/N] ", question)
	var answer string
	_, _ = fmt.Fscanln(c.in, &answer)
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes"
}
