package image

import (
	"fmt"
	"os"

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

// The accounts of distroless/static's nonroot variant: a static Go binary
// needs a passwd entry for its user (os/user, some libraries' home lookups).
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	// Go's resolver reads this to order /etc/hosts before DNS.
	nsswitch = "hosts: files dns\n"
)

// BaseFiles are what the Dockerfile's distroless/static-debian12:nonroot
// base gives a static binary: the accounts, CA certificates, a
// world-writable /tmp and the users' homes.
func BaseFiles() ([]File, error) {
	if _, err := os.Stat(CACertificates); err != nil {
		return nil, fmt.Errorf("CA certificates for the image: %w (on Debian: apt-get install ca-certificates)", err)
	}
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Path: "/etc/group", Mode: 0o644, Data: []byte(group)},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte(nsswitch)},
		{Path: CACertificates, Mode: 0o644, Source: CACertificates},
		{Path: "/tmp", Mode: os.ModeDir | os.ModeSticky | 0o777},
		{Path: "/root", Mode: os.ModeDir | 0o700},
		{Path: "/home/nonroot", Mode: os.ModeDir | 0o700, UID: NonRoot, GID: NonRoot},
	}, nil
}

// BaseLayer is BaseFiles as a layer.
func BaseLayer() (v1.Layer, error) {
	files, err := BaseFiles()
	if err != nil {
		return nil, err
	}
	return Layer(files)
}
