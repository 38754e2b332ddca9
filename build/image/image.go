package image

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Platform is one image of an index: linux on an architecture.
func Platform(arch string) v1.Platform {
	p := v1.Platform{OS: "linux", Architecture: arch}
	if arch == "arm64" {
		p.Variant = "v8" // what registries and containerd record for arm64
	}
	return p
}

// New is an OCI image of layers, bottom first, for one platform, with cfg
// as its runtime config (user, entrypoint, env, ...).
func New(p v1.Platform, cfg v1.Config, layers ...v1.Layer) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, fmt.Errorf("adding layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Config = cfg
	cf.Created = v1.Time{Time: Epoch}
	for i := range cf.History {
		cf.History[i].Created = v1.Time{Time: Epoch}
	}
	return mutate.ConfigFile(img, cf)
}

// Index is an OCI image index of images, each annotated with its platform
// so runtimes pick theirs.
func Index(images ...v1.Image) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, img := range images {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		p := cf.Platform()
		if p == nil {
			return nil, fmt.Errorf("an image of the index has no platform in its config")
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	return mutate.AppendManifests(idx, adds...), nil
}
