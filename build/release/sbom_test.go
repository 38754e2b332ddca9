package release

import (
	"debug/buildinfo"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/build/image"
)

// The SBOM is valid SPDX 2.3 as far as its references go, names every
// binary of the image and capoctl, and lists the modules read from their
// build info. The test binary stands in for each binary: it has build info
// too.
func TestSBOM(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	img := builtImage{digest: "sha256:" + strings.Repeat("ab", 32), arches: map[string]string{}, bins: map[string]string{}}
	for _, a := range Arches {
		dir := t.TempDir()
		for _, b := range image.Binaries {
			if err := os.Symlink(self, filepath.Join(dir, b.Name)); err != nil {
				t.Fatal(err)
			}
		}
		img.bins[a], img.arches[a] = dir, "sha256:"+strings.Repeat("cd", 32)
	}
	var clis []builtCLI
	for _, p := range CLIPlatforms {
		clis = append(clis, builtCLI{p, self})
	}
	s := Spec{Version: "v1.2.3", Out: t.TempDir(), Created: time.Unix(1764000000, 0)}
	if err := writeSBOM(s, img, clis); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(filepath.Join(s.Out, SBOMFile))
	if err := writeSBOM(s, img, clis); err != nil {
		t.Fatal(err)
	}
	if second, _ := os.ReadFile(filepath.Join(s.Out, SBOMFile)); string(first) != string(second) {
		t.Fatal("two SBOMs of the same inputs differ")
	}
	var doc spdxDoc
	if err := json.Unmarshal(first, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != "2025-11-24T16:00:00Z" {
		t.Fatalf("header: %s, created %s", doc.SPDXVersion, doc.CreationInfo.Created)
	}
	ids := map[string]bool{"SPDXRef-DOCUMENT": true}
	validID := regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)
	var names []string
	for _, p := range doc.Packages {
		if !validID.MatchString(p.SPDXID) || ids[p.SPDXID] {
			t.Errorf("package ID %q invalid or repeated", p.SPDXID)
		}
		ids[p.SPDXID] = true
		names = append(names, p.Name)
	}
	for _, f := range doc.Files {
		ids[f.SPDXID] = true
		if len(f.Checksums) == 0 || f.Checksums[0].Algorithm != "SHA1" {
			t.Errorf("file %s has no SHA1, which SPDX 2.3 requires", f.FileName)
		}
	}
	for _, r := range doc.Relationships {
		if !ids[r.A] || !ids[r.B] {
			t.Errorf("relationship %v names an element that is not in the document", r)
		}
	}
	// The CA bundle is a package, Debian's, containing the file.
	want := []string{"capo-agent", "capo-ipam", "capoctl", "go", Repo, "ca-certificates"}
	if !slices.Contains(doc.Relationships, spdxRel{"SPDXRef-deb-ca-certificates", "CONTAINS", spdxID("file", image.CACertificates)}) {
		t.Error("the ca-certificates package does not contain the CA bundle")
	}
	info, err := buildinfo.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range info.Deps {
		if d.Replace == nil {
			want = append(want, d.Path)
		}
	}
	for _, want := range want {
		if !slices.Contains(names, want) {
			t.Errorf("no package %q in %v", want, names)
		}
	}
	if len(doc.DocumentDescribes) != 1+len(CLIPlatforms) {
		t.Errorf("describes %v", doc.DocumentDescribes)
	}
}
