package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/capo-net/capo/build/image"
)

// Platform is where capoctl runs: an operator's workstation or a node.
type Platform struct{ OS, Arch string }

// CLIPlatforms are the platforms capoctl and kubectl-capo ship for.
var CLIPlatforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

func (p Platform) String() string { return p.OS + "-" + p.Arch }

// CLIFile is capoctl's binary for p in the release.
func CLIFile(p Platform) string { return "capoctl-" + p.String() }

// PluginFile is the krew archive for p: kubectl-capo and the LICENSE, as
// krew installs plugins from archives only.
func PluginFile(p Platform) string { return "kubectl-capo-" + p.String() + ".tar.gz" }

// builtCLI is one capoctl binary, for the SBOM.
type builtCLI struct {
	Platform
	path string
}

// buildCLIs builds capoctl for every platform, written as capoctl-OS-ARCH
// and, named kubectl-capo, into kubectl-capo-OS-ARCH.tar.gz.
func buildCLIs(ctx context.Context, s Spec, work string) ([]builtCLI, error) {
	license, err := os.ReadFile(filepath.Join(s.Root, "LICENSE"))
	if err != nil {
		return nil, err
	}
	ldflags := image.Capo{Version: s.Version}.LDFlags()
	var out []builtCLI
	for _, p := range CLIPlatforms {
		bin := filepath.Join(work, "capoctl", p.String(), "capoctl")
		if err := image.GoBuildFor(ctx, s.Root, "./cmd/capoctl", bin, p.OS, p.Arch, ldflags); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		if err := publish(s.Out, CLIFile(p), data, 0o755); err != nil {
			return nil, err
		}
		tgz, err := pluginArchive(data, license)
		if err != nil {
			return nil, fmt.Errorf("kubectl-capo for %s: %w", p, err)
		}
		if err := publish(s.Out, PluginFile(p), tgz, 0o644); err != nil {
			return nil, err
		}
		out = append(out, builtCLI{p, bin})
	}
	return out, nil
}

// pluginArchive is a reproducible tar.gz: fixed times and owners, and a
// gzip header without a name or time.
func pluginArchive(bin, license []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"LICENSE", 0o644, license}, {"kubectl-capo", 0o755, bin}} {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: image.Epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
