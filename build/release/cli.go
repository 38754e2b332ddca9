package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/capo-net/capo/build/image"
)

// Platform is where capoctl runs: an operator's workstation or a node.
type Platform struct{ OS, Arch string }

// CLIPlatforms are the platforms capoctl and kubectl-capo ship for.
var CLIPlatforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

func (p Platform) String() string { return p.OS + "-" + p.Arch }

// CLIFile is capoctl's binary for p in the release.
func CLIFile(p Platform) string { return "capoctl-" + p.String() }

// PluginFile is the krew archive for p: kubectl-capo, the LICENSE and,
// when the binary can print them, its completion scripts, as krew installs
// plugins from archives only.
func PluginFile(p Platform) string { return "kubectl-capo-" + p.String() + ".tar.gz" }

// builtCLI is one capoctl binary, for the SBOM.
type builtCLI struct {
	Platform
	path string
}

// buildCLIs builds capoctl for every platform, written as capoctl-OS-ARCH
// and, named kubectl-capo, into kubectl-capo-OS-ARCH.tar.gz with the
// completion scripts the binary for this machine prints (completions).
func buildCLIs(ctx context.Context, s Spec, work string, warn func(string)) ([]builtCLI, map[string][]byte, error) {
	license, err := os.ReadFile(filepath.Join(s.Root, "LICENSE"))
	if err != nil {
		return nil, nil, err
	}
	ldflags := image.Capo{Version: s.Version}.LDFlags()
	var out []builtCLI
	for _, p := range CLIPlatforms {
		bin := filepath.Join(work, "capoctl", p.String(), "capoctl")
		if err := image.GoBuildFor(ctx, s.Root, "./cmd/capoctl", bin, p.OS, p.Arch, ldflags); err != nil {
			return nil, nil, err
		}
		out = append(out, builtCLI{p, bin})
	}
	completions := pluginCompletions(ctx, out, filepath.Join(work, "completion"), warn)
	for _, c := range out {
		if err := publishCLI(s, c, license, completions); err != nil {
			return nil, nil, err
		}
	}
	return out, completions, nil
}

// publishCLI writes one platform's capoctl and its krew archive.
func publishCLI(s Spec, c builtCLI, license []byte, completions map[string][]byte) error {
	p := c.Platform
	data, err := os.ReadFile(c.path)
	if err != nil {
		return err
	}
	if err := publish(s.Out, CLIFile(p), data, 0o755); err != nil {
		return err
	}
	{
		tgz, err := pluginArchive(data, license, completions)
		if err != nil {
			return fmt.Errorf("kubectl-capo for %s: %w", p, err)
		}
		return publish(s.Out, PluginFile(p), tgz, 0o644)
	}
}

// pluginArchive is a reproducible tar.gz: fixed times and owners, and a
// gzip header without a name or time.
func pluginArchive(bin, license []byte, completions map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	type file struct {
		name string
		mode int64
		data []byte
	}
	files := []file{{"LICENSE", 0o644, license}, {"kubectl-capo", 0o755, bin}}
	for _, name := range slices.Sorted(maps.Keys(completions)) {
		files = append(files, file{"completion/" + name, 0o644, completions[name]})
	}
	for _, f := range files {
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
