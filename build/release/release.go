// Package release writes everything a capo release ships into one
// directory (`make release VERSION=vX.Y.Z`, see docs/releasing.md): the
// image archive, the chart and the manifests stamped with the version,
// capoctl for each platform, the krew manifest, an SPDX SBOM and SHA256SUMS.
package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Spec is one release.
type Spec struct {
	Root     string       // the repository root
	Version  string       // vX.Y.Z, the one place the version comes from
	Revision string       // the commit built (git rev-parse HEAD), for the image's label
	Out      string       // the directory written, e.g. dist
	Created  time.Time    // the SBOM's creation time: the commit's, so a rebuild writes the same file
	Warn     func(string) // what a release leaves out, and why (nil: stderr)
}

func (s Spec) warn(msg string) {
	if s.Warn != nil {
		s.Warn(msg)
		return
	}
	fmt.Fprintln(os.Stderr, "capo-release:", msg)
}

// semver is what a release's version must look like: Helm needs SemVer 2
// for the chart, and the image tag keeps the leading v.
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// CheckVersion says whether v can name a release.
func CheckVersion(v string) error {
	if !semver.MatchString(v) {
		return fmt.Errorf("VERSION %q is not a release version: give vMAJOR.MINOR.PATCH, e.g. make release VERSION=v0.2.0", v)
	}
	return nil
}

// ImageRef is the image the release's chart and manifests name.
func (s Spec) ImageRef() string { return Repo + ":" + s.Version }

// Run writes the release into s.Out, which it empties first: a file left
// from another version must not reach SHA256SUMS.
func Run(ctx context.Context, s Spec) error {
	if err := CheckVersion(s.Version); err != nil {
		return err
	}
	if err := os.RemoveAll(s.Out); err != nil {
		return err
	}
	if err := os.MkdirAll(s.Out, 0o750); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "capo-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	img, err := buildImage(ctx, s, work)
	if err != nil {
		return err
	}
	if err := writeChart(s); err != nil {
		return err
	}
	clis, completions, err := buildCLIs(ctx, s, work, s.warn)
	if err != nil {
		return err
	}
	if err := writeKrew(s, len(completions) > 0); err != nil {
		return err
	}
	if err := writeSBOM(s, img, clis); err != nil {
		return err
	}
	return writeSums(s.Out)
}

// SumsFile lists every other file of the release with its SHA-256, in the
// format `sha256sum -c` checks.
const SumsFile = "SHA256SUMS"

func writeSums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var lines []string
	for _, e := range entries {
		if e.IsDir() || e.Name() == SumsFile {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		lines = append(lines, sum+"  "+e.Name()+"\n")
	}
	slices.Sort(lines)
	return publish(dir, SumsFile, []byte(strings.Join(lines, "")), 0o644)
}

// publish writes one of the release's files.
func publish(dir, name string, data []byte, mode os.FileMode) error {
	return os.WriteFile(filepath.Join(dir, name), data, mode) //nolint:gosec // published files: readable by all, binaries executable
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
