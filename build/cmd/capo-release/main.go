// capo-release writes a release's files into one directory (see
// build/release): `make release VERSION=vX.Y.Z`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/capo-net/capo/build/release"
)

func main() {
	var s release.Spec
	flag.StringVar(&s.Version, "version", "", "the release's version, vMAJOR.MINOR.PATCH")
	flag.StringVar(&s.Out, "o", "dist", "the directory to write (emptied first)")
	allow := flag.Bool("allow-untagged", false, "build from a dirty or untagged tree: a test build, not a release")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, s, *allow); err != nil {
		fmt.Fprintln(os.Stderr, "capo-release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, s release.Spec, allowUntagged bool) error {
	if err := release.CheckVersion(s.Version); err != nil {
		return err
	}
	var err error
	if s.Root, err = os.Getwd(); err != nil {
		return err
	}
	warn := func(msg string) { fmt.Fprintln(os.Stderr, "capo-release:", msg) }
	if s.Revision, err = release.CheckTree(s.Root, s.Version, allowUntagged, warn); err != nil {
		return err
	}
	if s.Created, err = created(); err != nil {
		return err
	}
	start := time.Now()
	if err := release.Run(ctx, s); err != nil {
		return err
	}
	fmt.Printf("capo %s written to %s/ in %s\n", s.Version, s.Out, time.Since(start).Round(time.Second))
	return nil
}

// created is SOURCE_DATE_EPOCH if set, else the commit's time: the SBOM
// of a commit is the same whenever it is built.
func created() (time.Time, error) {
	sec := os.Getenv("SOURCE_DATE_EPOCH")
	if sec == "" {
		out, err := exec.Command("git", "log", "-1", "--format=%ct").Output()
		if err != nil {
			return time.Time{}, fmt.Errorf("the commit's time (or set SOURCE_DATE_EPOCH): %w", err)
		}
		sec = strings.TrimSpace(string(out))
	}
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", sec, err)
	}
	return time.Unix(n, 0).UTC(), nil
}
