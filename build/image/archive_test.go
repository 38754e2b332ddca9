package image

import (
	"archive/tar"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// smallIndex is a two-platform index of tiny images, enough to exercise
// the archive format without compiling anything.
func smallIndex(t *testing.T) v1.ImageIndex {
	t.Helper()
	var imgs []v1.Image
	for _, arch := range []string{"amd64", "arm64"} {
		l, err := Layer([]File{{Path: "/etc/arch", Mode: 0o644, Data: []byte(arch)}, {Path: "/tmp", Mode: os.ModeDir | os.ModeSticky | 0o777}})
		if err != nil {
			t.Fatal(err)
		}
		img, err := New(Platform(arch), Config("test", ""), l)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	idx, err := Index(imgs...)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// The same inputs give the same digest: the image can be rebuilt and
// compared anywhere.
func TestImagesAreReproducible(t *testing.T) {
	a, _ := smallIndex(t).Digest()
	b, _ := smallIndex(t).Digest()
	if a != b {
		t.Fatalf("two builds of the same files: %s and %s", a, b)
	}
}

// The archive is an OCI layout naming the index for containerd, plus a
// docker manifest.json for one platform.
func TestArchiveLayout(t *testing.T) {
	out := filepath.Join(t.TempDir(), "img.tar")
	idx := smallIndex(t)
	if err := WriteArchive(out, "example.com/capo:t1", idx, "arm64"); err != nil {
		t.Fatal(err)
	}
	files := untar(t, out, t.TempDir())
	for _, f := range []string{"oci-layout", "index.json", "manifest.json"} {
		if _, ok := files[f]; !ok {
			t.Fatalf("archive lacks %s; has %v", f, files)
		}
	}
	var top v1.IndexManifest
	if err := json.Unmarshal([]byte(files["index.json"]), &top); err != nil || len(top.Manifests) != 1 {
		t.Fatalf("index.json: %v: %s", err, files["index.json"])
	}
	want, _ := idx.Digest()
	if a := top.Manifests[0].Annotations; top.Manifests[0].Digest != want ||
		a["io.containerd.image.name"] != "example.com/capo:t1" || a["org.opencontainers.image.ref.name"] != "t1" {
		t.Fatalf("index.json does not name the built index for containerd: %s", files["index.json"])
	}
	img, err := tarball.ImageFromPath(out, nil) // what `crane push FILE` and classic docker load read
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil || cf.Architecture != "arm64" {
		t.Fatalf("manifest.json image: %v, arch %q, want arm64", err, cf.Architecture)
	}
}

// `crane push` takes the archive (one platform, from manifest.json) and the
// unpacked archive (the whole index) to a registry.
func TestCranePushesTheArchive(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	out := filepath.Join(dir, "img.tar")
	idx := smallIndex(t)
	if err := WriteArchive(out, "example.com/capo:t1", idx, "amd64"); err != nil {
		t.Fatal(err)
	}
	layoutDir := filepath.Join(dir, "layout")
	untar(t, out, layoutDir)
	crane(t, "push", out, host+"/capo:single")
	crane(t, "push", layoutDir, host+"/capo:multi")

	want, _ := idx.Digest()
	got, err := remote.Index(mustRef(t, host+"/capo:multi"))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d != want {
		t.Fatalf("pushed index %s, built %s", d, want)
	}
	single, err := remote.Image(mustRef(t, host+"/capo:single"))
	if err != nil {
		t.Fatal(err)
	}
	if cf, err := single.ConfigFile(); err != nil || cf.Architecture != "amd64" {
		t.Fatalf("pushed single image: %v %+v", err, cf)
	}
}

func crane(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "crane", "--insecure"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("crane %v: %v\n%s", args, err, out)
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	r, err := name.ParseReference(s, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// untar unpacks file into dir and returns the small files' contents by name.
func untar(t *testing.T, file, dir string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 4096 {
			out[hdr.Name] = string(b)
		}
		dst := filepath.Join(dir, hdr.Name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
