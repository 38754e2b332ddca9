package image

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// finalStage is what the Dockerfile's last stage says about the image.
type finalStage struct {
	from       string
	copies     []string // basenames copied
	copyDest   string
	user       string
	entrypoint []string
}

// parseDockerfile reads the instructions of the last stage; only the forms
// capo's Dockerfile uses are understood, anything else in that stage fails
// the test so a change to the Dockerfile is noticed here.
func parseDockerfile(t *testing.T, file string) finalStage {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st finalStage
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			st = finalStage{from: strings.Fields(rest)[0]}
		case "COPY":
			args := strings.Fields(rest)
			if !strings.HasPrefix(args[0], "--from=") {
				continue // a build-stage COPY of the sources
			}
			st.copyDest = args[len(args)-1]
			for _, src := range args[1 : len(args)-1] {
				st.copies = append(st.copies, path.Base(src))
			}
		case "USER":
			st.user = strings.TrimSpace(rest)
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &st.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: only the JSON form is understood: %v", rest, err)
			}
		case "ARG":
			// VERSION and REVISION feed the final stage's LABEL only, which
			// TestImageLabels holds to build/image's.
			name, _, _ := strings.Cut(rest, "=")
			if strings.Contains(st.from, "distroless") && name != "VERSION" && name != "REVISION" {
				t.Fatalf("Dockerfile: ARG %s in the final stage is not mirrored by build/image; add it there and here", name)
			}
		case "WORKDIR", "ENV", "RUN":
			if st.from != "" && strings.Contains(st.from, "distroless") {
				t.Fatalf("Dockerfile: %s in the final stage is not mirrored by build/image; add it there and here", instr)
			}
		}
	}
	return st
}

// The Go-built image and the Dockerfile describe the same image: the same
// binaries in the same place, the same user and entrypoint, and what the
// distroless nonroot base provides.
func TestDockerfileAndGoImageAgree(t *testing.T) {
	root, _ := filepath.Abs("../..")
	st := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	if st.from != "gcr.io/distroless/static-debian12:nonroot" {
		t.Fatalf("the Dockerfile's base is %s; BaseFiles mirrors distroless/static-debian12:nonroot: update both", st.from)
	}
	var names []string
	for _, b := range Binaries {
		names = append(names, b.Name)
	}
	if !slices.Equal(sorted(st.copies), sorted(names)) || st.copyDest != BinDir+"/" {
		t.Fatalf("Dockerfile copies %v to %s; the Go image ships %v in %s", st.copies, st.copyDest, names, BinDir)
	}
	cfg := Config("test", "")
	if st.user != cfg.User || !slices.Equal(st.entrypoint, cfg.Entrypoint) {
		t.Fatalf("Dockerfile: USER %s ENTRYPOINT %v; Go image: %s %v", st.user, st.entrypoint, cfg.User, cfg.Entrypoint)
	}

	img := capoImage(t)
	files := extract(t, img, t.TempDir())
	for _, n := range names {
		if m, ok := files[BinDir+"/"+n]; !ok || m&0o111 == 0 {
			t.Errorf("%s/%s missing or not executable in the Go image", BinDir, n)
		}
	}
	for p, want := range map[string]int64{"/tmp": 0o1777, "/etc/passwd": 0o644, CACertificates: 0o644, "/home/nonroot": 0o700} {
		if got, ok := files[p]; !ok || got != want {
			t.Errorf("%s: mode %o present %v, want %o as in distroless", p, got, ok, want)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != st.user || !slices.Equal(cf.Config.Entrypoint, st.entrypoint) {
		t.Fatalf("built image config: user %q entrypoint %v", cf.Config.User, cf.Config.Entrypoint)
	}
}

// The binaries in the image carry the version, stamped as `make build` does.
func TestImageBinariesCarryTheVersion(t *testing.T) {
	dir := t.TempDir()
	extract(t, capoImage(t), dir)
	out, err := exec.Command(filepath.Join(dir, BinDir, "capo-ipam")).CombinedOutput()
	if err != nil {
		t.Fatalf("running capo-ipam from the image: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "capo-ipam "+testVersion) {
		t.Fatalf("capo-ipam from the image does not report the stamped version:\n%s", out)
	}
}

const testVersion = "v-test-1"

var work string

func TestMain(m *testing.M) {
	var err error
	if work, err = os.MkdirTemp("", "capo-image-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(work)
	os.Exit(code)
}

var built struct {
	once sync.Once
	img  v1.Image
	err  error
}

// capoImage builds capo's image for this machine's architecture once for
// the tests that look into it.
func capoImage(t *testing.T) v1.Image {
	t.Helper()
	built.once.Do(func() {
		root, _ := filepath.Abs("../..")
		// The layer reads the binaries whenever its bytes are needed: the
		// work dir lives as long as the test binary (see TestMain).
		idx, err := Capo{Root: root, Version: testVersion, Arches: []string{runtime.GOARCH}, WorkDir: work}.Build(context.Background())
		if err != nil {
			built.err = err
			return
		}
		built.img, built.err = onlyImage(idx)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.img
}

func onlyImage(idx v1.ImageIndex) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(im.Manifests) != 1 {
		return nil, fmt.Errorf("index of %d images, want 1", len(im.Manifests))
	}
	return idx.Image(im.Manifests[0].Digest)
}

// extract unpacks the image's filesystem into dir and returns each path's
// permission bits (with the sticky bit as tar has it).
func extract(t *testing.T, img v1.Image, dir string) map[string]int64 {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	modes := map[string]int64{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return modes
		}
		if err != nil {
			t.Fatal(err)
		}
		p := "/" + strings.TrimSuffix(hdr.Name, "/")
		modes[p] = hdr.Mode
		if hdr.Typeflag == tar.TypeReg {
			dst := filepath.Join(dir, p)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, os.FileMode(hdr.Mode)&0o777); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
