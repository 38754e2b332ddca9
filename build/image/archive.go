package image

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Annotations containerd and docker read to name an imported image.
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// WriteArchive writes idx, named ref, as one tar file that each common
// consumer reads its own way (the layout `docker save` writes since
// Docker 25):
//   - an OCI image layout (oci-layout, index.json, blobs/): ctr images
//     import, kind load image-archive (ctr underneath), docker load with
//     the containerd image store, and `crane push` of the unpacked
//     directory take the whole multi-platform index;
//   - a docker manifest.json naming the image for dockerArch over the same
//     blobs: docker load with the classic store and `crane push FILE` take
//     that one image.
//
// The file is written to a temporary name and renamed into place.
func WriteArchive(path, ref string, idx v1.ImageIndex, dockerArch string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		annotationImageName: tag.Name(), annotationRefName: tag.TagStr(),
	})); err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}
	manifest, err := dockerManifest(idx, tag, dockerArch)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), manifest, 0o600); err != nil {
		return err
	}
	return tarDir(dir, path)
}

// dockerManifest is docker's manifest.json for the index's image of arch,
// pointing into the layout's blobs.
func dockerManifest(idx v1.ImageIndex, tag name.Tag, arch string) ([]byte, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform == nil || d.Platform.Architecture != arch {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		cfg, err := img.ConfigName()
		if err != nil {
			return nil, err
		}
		layers, err := img.Layers()
		if err != nil {
			return nil, err
		}
		entry := struct {
			Config   string
			RepoTags []string
			Layers   []string
		}{Config: blobPath(cfg), RepoTags: []string{tag.Name()}}
		for _, l := range layers {
			h, err := l.Digest()
			if err != nil {
				return nil, err
			}
			entry.Layers = append(entry.Layers, blobPath(h))
		}
		return json.Marshal([]any{entry})
	}
	return nil, fmt.Errorf("the index has no linux/%s image for docker's manifest.json", arch)
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// tarDir writes the files under dir, sorted, with fixed times, into out.
func tarDir(dir, out string) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	slices.Sort(paths)
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	for _, p := range paths {
		if err := addFile(tw, dir, p); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

func addFile(tw *tar.Writer, dir, p string) error {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return err
	}
	in, err := os.Open(p)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: st.Size(), ModTime: Epoch, Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
}
