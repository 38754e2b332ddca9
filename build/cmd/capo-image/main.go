// capo-image builds capo's image without a container engine and writes it
// as one archive (see build/image): `make image`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/capo-net/capo/build/image"
)

type config struct {
	out, ref, version, revision, arches, dockerArch string
}

func main() {
	var c config
	flag.StringVar(&c.out, "o", "bin/capo-image.tar", "the archive to write")
	flag.StringVar(&c.ref, "image", "ghcr.io/capo-net/capo:dev", "the image's name and tag")
	flag.StringVar(&c.version, "version", "dev", "the version stamped into the binaries")
	flag.StringVar(&c.revision, "revision", "", "the commit, for the image's org.opencontainers.image.revision label (make image: git rev-parse HEAD)")
	flag.StringVar(&c.arches, "arch", "amd64,arm64", "architectures, comma-separated")
	flag.StringVar(&c.dockerArch, "docker-arch", runtime.GOARCH, "the architecture docker's manifest.json names (classic docker load, crane push FILE)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "capo-image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.out), 0o750); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "capo-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	spec := image.Capo{Root: root, Version: c.version, Revision: c.revision, Arches: strings.Split(c.arches, ","), WorkDir: work}
	idx, err := spec.Build(ctx)
	if err != nil {
		return err
	}
	if err := image.WriteArchive(c.out, c.ref, idx, c.dockerArch); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s (linux/%s), index %s\n", c.out, c.ref, strings.ReplaceAll(c.arches, ",", ", linux/"), d)
	return nil
}
