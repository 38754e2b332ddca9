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
	EchoImage      = "capo.test/echo:1" // the traffic tests' client and server
	CapoRepository = "capo.test/capo"
	// CapoVersion is stamped into the capo binaries of the bed's image.
	CapoVersion = "realnode"
)

// CapoTags are two tags of the same capo image: a DaemonSet update from
// one to the other is a rolling update with nothing else changed. Only the
// first is imported at start; ImportCapoTag brings in the second when a
// test wants it, the way a pull finishes on a real node.
var CapoTags = []string{"1", "2"}

// images are the bed's images once built.
type images struct {
	sleeper, echo, capo v1.ImageIndex
	err                 error
	done                chan struct{}
}

// buildImages builds, in the background, the sleeper (the sandbox's pause
// process and the test workload) and capo's image from this checkout, for
// this machine's architecture, in dir. Their layers read the binaries in
// dir when imported: dir must live until then.
func buildImages(ctx context.Context, root, dir string) *images {
	im := &images{done: make(chan struct{})}
	go func() {
		defer close(im.done)
		im.sleeper, im.err = programImage(ctx, root, dir, "sleeper")
		if im.err == nil {
			im.echo, im.err = programImage(ctx, root, dir, "echo")
		}
		if im.err == nil {
			im.capo, im.err = image.Capo{Root: root, Version: CapoVersion, Arches: []string{runtime.GOARCH}, WorkDir: filepath.Join(dir, "capo")}.Build(ctx)
		}
	}()
	return im
}

// programImage is an image of one static binary, test/nodebed/<name>, as
// its entrypoint.
func programImage(ctx context.Context, root, dir, name string) (v1.ImageIndex, error) {
	bin := filepath.Join(dir, name)
	if err := image.GoBuild(ctx, root, "./test/nodebed/"+name, bin, runtime.GOARCH, "-s -w"); err != nil {
		return nil, err
	}
	layer, err := image.Layer([]image.File{{Path: "/" + name, Mode: 0o755, Source: bin}})
	if err != nil {
		return nil, err
	}
	img, err := image.New(image.Platform(runtime.GOARCH), v1.Config{Entrypoint: []string{"/" + name}}, layer)
	if err != nil {
		return nil, err
	}
	return image.Index(img)
}

// importImages waits for the images and imports them: the sleeper as the
// pause and the workload image, echo, capo's under its first tag.
func (b *Bed) importImages(im *images) error {
	<-im.done
	if im.err != nil {
		return fmt.Errorf("building the bed's images: %w", im.err)
	}
	for _, ref := range []string{PauseImage, SleeperImage} {
		if err := b.writeAndImport(filepath.Join(b.ImagesDir, "sleeper.tar"), ref, im.sleeper); err != nil {
			return err
		}
	}
	if err := b.writeAndImport(filepath.Join(b.ImagesDir, "echo.tar"), EchoImage, im.echo); err != nil {
		return err
	}
	return b.ImportCapoTag(CapoTags[0])
}

// ImportCapoTag imports capo's image under tag; importing it again is
// harmless.
func (b *Bed) ImportCapoTag(tag string) error {
	return b.writeAndImport(filepath.Join(b.ImagesDir, "capo-"+tag+".tar"), CapoRepository+":"+tag, b.images.capo)
}

func (b *Bed) writeAndImport(archive, ref string, idx v1.ImageIndex) error {
	if err := image.WriteArchive(archive, ref, idx, runtime.GOARCH); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	return b.ImportImage(archive)
}
