// Package image builds container images without a container engine: files
// laid out in tar layers, an OCI config, a multi-platform index, and an
// archive that docker load, ctr images import, kind load image-archive and
// crane push all accept. capo's own image (capo.go) is one use; the
// real-node test bed builds its small test images with the same code.
package image

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Epoch is every file's modification time and the image's creation time:
// the same inputs give the same digests, on any machine, at any time.
var Epoch = time.Unix(0, 0).UTC()

// File is one entry of a layer.
type File struct {
	Path     string      // absolute path in the image
	Mode     os.FileMode // permission bits, plus os.ModeDir for a directory
	UID, GID int
	Data     []byte // the content, or
	Source   string // a file on disk to copy
}

// Dir is a directory entry owned by root.
func Dir(p string, mode os.FileMode) File { return File{Path: p, Mode: os.ModeDir | mode} }

// Layer is a gzip-compressed OCI layer holding files, with every parent
// directory that files leave out created as root's 0755. It reads Sources
// each time the layer's bytes are needed, so they must not change.
func Layer(files []File) (v1.Layer, error) {
	all, err := withParents(files)
	if err != nil {
		return nil, err
	}
	for _, f := range all {
		if f.Source != "" {
			if _, err := os.Stat(f.Source); err != nil {
				return nil, fmt.Errorf("layer file %s: %w", f.Path, err)
			}
		}
	}
	open := func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeTar(pw, all)) }()
		return pr, nil
	}
	return tarball.LayerFromOpener(open, tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzip.BestSpeed))
}

// withParents sorts files by path and adds missing parent directories, so
// every tool that unpacks the layer creates them with the same owner and mode.
func withParents(files []File) ([]File, error) {
	byPath := map[string]File{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path {
			return nil, fmt.Errorf("layer path %q must be absolute and clean", f.Path)
		}
		if _, dup := byPath[f.Path]; dup {
			return nil, fmt.Errorf("layer path %s given twice", f.Path)
		}
		byPath[f.Path] = f
	}
	for _, f := range files {
		for p := path.Dir(f.Path); p != "/"; p = path.Dir(p) {
			if _, ok := byPath[p]; !ok {
				byPath[p] = Dir(p, 0o755)
			}
		}
	}
	out := make([]File, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func writeTar(w io.Writer, files []File) error {
	tw := tar.NewWriter(w)
	for _, f := range files {
		if err := writeEntry(tw, f); err != nil {
			return fmt.Errorf("layer file %s: %w", f.Path, err)
		}
	}
	return tw.Close()
}

func writeEntry(tw *tar.Writer, f File) error {
	hdr := &tar.Header{
		Name: strings.TrimPrefix(f.Path, "/"), Mode: int64(f.Mode.Perm()),
		Uid: f.UID, Gid: f.GID, ModTime: Epoch, Format: tar.FormatPAX,
	}
	if f.Mode&os.ModeSticky != 0 {
		hdr.Mode |= 0o1000 // tar's sticky bit (Go's os.ModeSticky is another bit)
	}
	if f.Mode.IsDir() {
		hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		return tw.WriteHeader(hdr)
	}
	data := f.Data
	if f.Source != "" {
		b, err := os.ReadFile(f.Source)
		if err != nil {
			return err
		}
		data = b
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
