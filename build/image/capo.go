package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Binary is one of capo's programs and its main package, relative to the
// repository root. This table is the one place the image names them.
type Binary struct{ Name, Package string }

// Binaries are the programs the image ships in /usr/local/bin, as the
// Dockerfile's final stage copies them.
var Binaries = []Binary{
	{"capo-agent", "./cmd/capo-agent"},
	{"capo-controller", "./cmd/capo-controller"},
	{"capo-install", "./cmd/capo-install"},
	{"capo-ipam", "./cmd/capo-ipam"},
	{"capo-ipam-kube", "./cmd/capo-ipam-kube"},
}

// BinDir is where the binaries go in the image.
const BinDir = "/usr/local/bin"

// NonRoot is distroless's nonroot user, the image's default user.
const NonRoot = 65532

// CACertificates is the host's CA bundle the image carries: Debian's, as in
// the distroless/static-debian12 base the Dockerfile uses.
var CACertificates = "/etc/ssl/certs/ca-certificates.crt"

// Capo describes one build of capo's image.
type Capo struct {
	Root     string   // the repository root
	Version  string   // stamped into the binaries, as `make build` does
	Revision string   // the commit built, for the image's revision label (empty: left out)
	Arches   []string // e.g. amd64, arm64
	WorkDir  string   // where the binaries are built
}

// Description is the image's one-line description (its label, the SBOM's).
// The Dockerfile's LABEL says the same.
const Description = "capo keeps a stateful pod's old IP address reserved on Calico clusters, on every teardown path"

// License is capo's, as the image's licenses label and the SBOM declare it.
const License = "Apache-2.0"

// Config is the image's runtime config: the Dockerfile's USER and
// ENTRYPOINT, what the distroless base sets, and the OCI annotation keys as
// labels (title, description, version, revision, source, url, licenses),
// which registries and scanners show.
func Config(version, revision string) v1.Config {
	labels := map[string]string{
		"org.opencontainers.image.title":         "capo",
		"org.opencontainers.image.description":   Description,
		"org.opencontainers.image.version":       version,
		"org.opencontainers.image.source":        "https://github.com/capo-net/capo",
		"org.opencontainers.image.url":           "https://github.com/capo-net/capo",
		"org.opencontainers.image.documentation": "https://github.com/capo-net/capo/blob/main/docs/operations.md",
		"org.opencontainers.image.licenses":      License,
	}
	if revision != "" {
		labels["org.opencontainers.image.revision"] = revision
	}
	return v1.Config{
		User:       fmt.Sprintf("%d:%d", NonRoot, NonRoot),
		Entrypoint: []string{BinDir + "/capo-controller"},
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"SSL_CERT_FILE=" + CACertificates,
		},
		WorkingDir: "/home/nonroot",
		Labels:     labels,
	}
}

// Build compiles the binaries for each arch and returns the index of
// images: a base layer with what a static Go binary needs, and a layer
// with the binaries.
func (c Capo) Build(ctx context.Context) (v1.ImageIndex, error) {
	base, err := BaseLayer()
	if err != nil {
		return nil, err
	}
	var imgs []v1.Image
	for _, arch := range c.Arches {
		dir := filepath.Join(c.WorkDir, arch)
		var pkgs []string
		for _, b := range Binaries {
			pkgs = append(pkgs, b.Package)
		}
		// One go build for all: the links run in parallel.
		if err := GoBuild(ctx, c.Root, strings.Join(pkgs, " "), dir+"/", arch, c.LDFlags()); err != nil {
			return nil, err
		}
		var files []File
		for _, b := range Binaries {
			files = append(files, File{Path: BinDir + "/" + b.Name, Mode: 0o755, Source: filepath.Join(dir, b.Name)})
		}
		bins, err := Layer(files)
		if err != nil {
			return nil, err
		}
		img, err := New(Platform(arch), Config(c.Version, c.Revision), base, bins)
		if err != nil {
			return nil, err
		}
		imgs = append(imgs, img)
	}
	return Index(imgs...)
}

// LDFlags are `make build`'s: stripped, with the version stamped in.
func (c Capo) LDFlags() string {
	return "-s -w -X github.com/capo-net/capo/pkg/version.Version=" + c.Version
}

// GoBuild builds static binaries of pkgs (space-separated, relative to dir)
// for linux/arch; out is the binary, or a directory (ending in /) for
// several, each named after its package.
func GoBuild(ctx context.Context, dir, pkgs, out, arch, ldflags string) error {
	return GoBuildFor(ctx, dir, pkgs, out, "linux", arch, ldflags)
}

// GoBuildFor is GoBuild for any goos (capoctl also ships for darwin).
func GoBuildFor(ctx context.Context, dir, pkgs, out, goos, arch, ldflags string) error {
	args := append([]string{"build", "-trimpath", "-ldflags", ldflags, "-o", out}, strings.Fields(pkgs)...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %w\n%s", pkgs, goos, arch, err, b)
	}
	return nil
}
