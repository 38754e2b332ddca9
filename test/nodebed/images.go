package nodebed

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/capo-net/capo/build/image"
)

// Images the bed builds at test time and imports into containerd; no
// registry is involved (pull policy Never).
const (
	SleeperImage   = "capo.test/sleeper:1"
	CapoRepository = "capo.test/capo"
	// CapoVersion is stamped into the capo binaries of the bed's image.
	CapoVersion = "realnode"
)

// CapoTags are two tags of the same capo image: a DaemonSet update from
// one to the other is a rolling update with nothing else changed.
var CapoTags = []string{"1", "2"}

// buildImages builds the sleeper (the sandbox's pause process and the test
// workload) and capo's image from this checkout, for this machine's
// architecture, and imports them.
func (b *Bed) buildImages(ctx context.Context) error {
	dir := filepath.Join(b.Dir, "images")
	sleeper := filepath.Join(dir, "sleeper")
	if err := image.GoBuild(ctx, b.root, "./test/nodebed/sleeper", sleeper, runtime.GOARCH, "-s -w"); err != nil {
		return err
	}
	layer, err := image.Layer([]image.File{{Path: "/sleeper", Mode: 0o755, Source: sleeper}})
	if err != nil {
		return err
	}
	img, err := image.New(image.Platform(runtime.GOARCH), v1.Config{Entrypoint: []string{"/sleeper"}}, layer)
	if err != nil {
		return err
	}
	idx, err := image.Index(img)
	if err != nil {
		return err
	}
	for _, ref := range []string{PauseImage, SleeperImage} {
		if err := b.writeAndImport(filepath.Join(dir, "sleeper.tar"), ref, idx); err != nil {
			return err
		}
	}
	capo, err := image.Capo{Root: b.root, Version: CapoVersion, Arches: []string{runtime.GOARCH}, WorkDir: filepath.Join(dir, "capo")}.Build(ctx)
	if err != nil {
		return err
	}
	for _, tag := range CapoTags {
		if err := b.writeAndImport(filepath.Join(dir, "capo.tar"), CapoRepository+":"+tag, capo); err != nil {
			return err
		}
	}
	return nil
}

func (b *Bed) writeAndImport(archive, ref string, idx v1.ImageIndex) error {
	if err := image.WriteArchive(archive, ref, idx, runtime.GOARCH); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	return b.ImportImage(archive)
}
