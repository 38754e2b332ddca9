package release

import (
	"context"
	"path/filepath"
	"runtime"

	"github.com/capo-net/capo/build/image"
)

// Arches are the platforms the image is built for.
var Arches = []string{"amd64", "arm64"}

// ImageFile is the image archive's name in the release.
func (s Spec) ImageFile() string { return "capo-image-" + s.Version + ".tar" }

// builtImage is what the SBOM needs from the image build.
type builtImage struct {
	digest string            // the index's
	arches map[string]string // arch -> the image's digest
	bins   map[string]string // arch -> the directory its binaries were built in
}

// buildImage writes the multi-arch image archive, as `make image` does,
// with the release's version in the binaries and the labels.
func buildImage(ctx context.Context, s Spec, work string) (builtImage, error) {
	spec := image.Capo{Root: s.Root, Version: s.Version, Revision: s.Revision, Arches: Arches, WorkDir: filepath.Join(work, "image")}
	idx, err := spec.Build(ctx)
	if err != nil {
		return builtImage{}, err
	}
	if err := image.WriteArchive(filepath.Join(s.Out, s.ImageFile()), s.ImageRef(), idx, runtime.GOARCH); err != nil {
		return builtImage{}, err
	}
	d, err := idx.Digest()
	if err != nil {
		return builtImage{}, err
	}
	out := builtImage{digest: d.String(), arches: map[string]string{}, bins: map[string]string{}}
	im, err := idx.IndexManifest()
	if err != nil {
		return builtImage{}, err
	}
	for _, m := range im.Manifests {
		if m.Platform != nil {
			out.arches[m.Platform.Architecture] = m.Digest.String()
		}
	}
	for _, a := range Arches {
		out.bins[a] = filepath.Join(spec.WorkDir, a)
	}
	return out, nil
}
