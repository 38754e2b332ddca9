package release

import (
	"crypto/sha1" //nolint:gosec // SPDX 2.3 requires a SHA1 checksum on every file
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/capo-net/capo/build/image"
)

// SBOMFile is the release's SPDX 2.3 SBOM: the image (each architecture's
// binaries and base files) and the capoctl binaries, each binary with the
// Go modules and the Go toolchain linked into it, read from its build info.
const SBOMFile = "sbom.spdx.json"

// sbom collects an SPDX document's elements; each is added once.
type sbom struct {
	doc      spdxDoc
	seen     map[string]bool
	licenses *licenseFinder
}

func (b *sbom) pkg(p spdxPackage) string {
	if !b.seen[p.SPDXID] {
		b.seen[p.SPDXID] = true
		p.DownloadLocation = or(p.DownloadLocation, "NOASSERTION")
		p.LicenseConcluded = or(p.LicenseConcluded, "NOASSERTION")
		p.LicenseDeclared = or(p.LicenseDeclared, "NOASSERTION")
		p.CopyrightText = "NOASSERTION"
		b.doc.Packages = append(b.doc.Packages, p)
	}
	return p.SPDXID
}

func (b *sbom) rel(a, kind, c string) {
	b.doc.Relationships = append(b.doc.Relationships, spdxRel{a, kind, c})
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

var notID = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(parts ...string) string {
	return "SPDXRef-" + notID.ReplaceAllString(strings.Join(parts, "-"), "-")
}

// writeSBOM writes the SBOM; every list is sorted, and the creation time is
// the commit's, so the same commit gives the same file.
func writeSBOM(s Spec, img builtImage, clis []builtCLI) error {
	b := &sbom{seen: map[string]bool{}, licenses: newLicenseFinder(), doc: spdxDoc{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              "capo-" + s.Version,
		DocumentNamespace: fmt.Sprintf("https://github.com/capo-net/capo/spdx/capo-%s-%s", s.Version, strings.TrimPrefix(img.digest, "sha256:")[:16]),
		CreationInfo:      spdxCreation{Created: s.Created.UTC().Format("2006-01-02T15:04:05Z"), Creators: []string{"Tool: capo-release-" + s.Version}},
	}}
	index := b.pkg(spdxPackage{
		SPDXID: "SPDXRef-image", Name: Repo, VersionInfo: s.Version, PrimaryPackagePurpose: "CONTAINER",
		Checksums:    []spdxChecksum{digestSum(img.digest)},
		ExternalRefs: []spdxExtRef{purl(fmt.Sprintf("pkg:oci/capo@%s?repository_url=%s&tag=%s", img.digest, Repo, s.Version))},
	})
	b.doc.DocumentDescribes = append(b.doc.DocumentDescribes, index)
	base, err := b.baseFiles()
	if err != nil {
		return err
	}
	for _, arch := range Arches {
		id := b.pkg(spdxPackage{
			SPDXID: spdxID("image", arch), Name: Repo + " linux/" + arch, VersionInfo: s.Version,
			PrimaryPackagePurpose: "CONTAINER", Checksums: []spdxChecksum{digestSum(img.arches[arch])},
		})
		b.rel(index, "CONTAINS", id)
		for _, f := range base {
			b.rel(id, "CONTAINS", f)
		}
		for _, bin := range image.Binaries {
			bid, err := b.binary(s, bin.Name, "linux", arch, filepath.Join(img.bins[arch], bin.Name))
			if err != nil {
				return err
			}
			b.rel(id, "CONTAINS", bid)
		}
	}
	for _, c := range clis {
		id, err := b.binary(s, "capoctl", c.OS, c.Arch, c.path)
		if err != nil {
			return err
		}
		b.doc.DocumentDescribes = append(b.doc.DocumentDescribes, id)
	}
	for _, d := range b.doc.DocumentDescribes {
		b.rel("SPDXRef-DOCUMENT", "DESCRIBES", d)
	}
	b.sort()
	out, err := json.MarshalIndent(b.doc, "", "  ")
	if err != nil {
		return err
	}
	return publish(s.Out, SBOMFile, append(out, '\n'), 0o644)
}

// binary adds a Go binary and what its build info says is linked in.
func (b *sbom) binary(s Spec, name, goos, arch, path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("build info of %s: %w", path, err)
	}
	id := b.pkg(spdxPackage{
		SPDXID: spdxID("bin", name, goos, arch), Name: name, VersionInfo: s.Version,
		PrimaryPackagePurpose: "APPLICATION", Checksums: sums(data), LicenseDeclared: "Apache-2.0",
		Comment:      fmt.Sprintf("%s/%s, built from %s by %s", goos, arch, info.Path, info.GoVersion),
		ExternalRefs: []spdxExtRef{purl("pkg:golang/" + info.Main.Path + "@" + s.Version)},
	})
	std := b.pkg(spdxPackage{
		SPDXID: spdxID("go", info.GoVersion), Name: "go", VersionInfo: info.GoVersion, LicenseDeclared: "BSD-3-Clause",
		PrimaryPackagePurpose: "LIBRARY", ExternalRefs: []spdxExtRef{purl("pkg:golang/stdlib@" + info.GoVersion)},
	})
	b.rel(id, "DEPENDS_ON", std)
	for _, d := range info.Deps {
		m, note := d, ""
		if d.Replace != nil {
			m, note = d.Replace, "replaces "+d.Path+"@"+d.Version+"; "
		}
		// Declared and concluded alike: read from the module's own license file.
		lic := b.licenses.module(m.Path, m.Version)
		dep := b.pkg(spdxPackage{
			SPDXID: spdxID("gomod", m.Path, m.Version), Name: m.Path, VersionInfo: m.Version,
			LicenseDeclared: lic, LicenseConcluded: lic,
			PrimaryPackagePurpose: "LIBRARY", Comment: note + "go.sum " + m.Sum,
			ExternalRefs: []spdxExtRef{purl("pkg:golang/" + m.Path + "@" + m.Version)},
		})
		b.rel(id, "DEPENDS_ON", dep)
	}
	return id, nil
}

// baseFiles adds the image's base layer files (accounts, CA certificates);
// the CA bundle as the Debian package it comes from, which contains it, so
// a scanner matches it against Debian's advisories.
func (b *sbom) baseFiles() ([]string, error) {
	files, err := image.BaseFiles()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, f := range files {
		if f.Mode.IsDir() {
			continue
		}
		data := f.Data
		if f.Source != "" {
			if data, err = os.ReadFile(f.Source); err != nil {
				return nil, err
			}
		}
		id := spdxID("file", f.Path)
		b.doc.Files = append(b.doc.Files, spdxFile{
			SPDXID: id, FileName: "." + f.Path, Checksums: sums(data),
			LicenseConcluded: "NOASSERTION", CopyrightText: "NOASSERTION",
		})
		if f.Path == image.CACertificates {
			pkg := b.caPackage()
			b.rel(pkg, "CONTAINS", id)
			id = pkg
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func (b *sbom) sort() {
	slices.SortFunc(b.doc.Packages, func(x, y spdxPackage) int { return strings.Compare(x.SPDXID, y.SPDXID) })
	slices.SortFunc(b.doc.Files, func(x, y spdxFile) int { return strings.Compare(x.SPDXID, y.SPDXID) })
	slices.SortFunc(b.doc.Relationships, func(x, y spdxRel) int {
		return strings.Compare(x.A+" "+x.Kind+" "+x.B, y.A+" "+y.Kind+" "+y.B)
	})
	b.doc.Relationships = slices.Compact(b.doc.Relationships)
	slices.Sort(b.doc.DocumentDescribes)
}

func sums(data []byte) []spdxChecksum {
	s1, s256 := sha1.Sum(data), sha256.Sum256(data) //nolint:gosec // see the import
	return []spdxChecksum{{"SHA1", hex.EncodeToString(s1[:])}, {"SHA256", hex.EncodeToString(s256[:])}}
}

func digestSum(d string) spdxChecksum {
	return spdxChecksum{"SHA256", strings.TrimPrefix(d, "sha256:")}
}

func purl(p string) spdxExtRef {
	return spdxExtRef{Category: "PACKAGE-MANAGER", Type: "purl", Locator: p}
}

// caPackage is the CA bundle's package: Debian's ca-certificates, at the
// version dpkg says is installed on the building machine (the bundle is
// copied from it), NOASSERTION where dpkg cannot say.
func (b *sbom) caPackage() string {
	version := ""
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "ca-certificates").Output(); err == nil {
		version = strings.TrimSpace(string(out))
	}
	p := spdxPackage{
		SPDXID: "SPDXRef-deb-ca-certificates", Name: "ca-certificates", VersionInfo: or(version, "NOASSERTION"),
		PrimaryPackagePurpose: "OPERATING-SYSTEM", Supplier: "Organization: Debian",
		// Debian's copyright file: the certificates are Mozilla's (MPL-2.0), the scripts GPL-2.0+.
		LicenseDeclared: "MPL-2.0 AND GPL-2.0-or-later",
		Comment:         "the CA bundle " + image.CACertificates + ", copied into the image from the building machine",
	}
	if version != "" {
		p.ExternalRefs = []spdxExtRef{purl("pkg:deb/debian/ca-certificates@" + version)}
	}
	return b.pkg(p)
}
