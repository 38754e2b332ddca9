package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/capo-net/capo/deploy"
)

func TestCheckVersion(t *testing.T) {
	for v, ok := range map[string]bool{
		"v0.2.0": true, "v1.10.3": true, "v1.0.0-rc.1": true,
		"": false, "0.2.0": false, "v0.2": false, "v01.2.3": false, "0c8cf9b": false, "v0.2.0-dirty ": false,
	} {
		if err := CheckVersion(v); (err == nil) != ok {
			t.Errorf("CheckVersion(%q) = %v", v, err)
		}
	}
}

// The stamped chart names the release's image, and its labels carry the
// version, in the chart and in the rendered manifests.
func TestStampedChartNamesTheRelease(t *testing.T) {
	s := Spec{Version: "v1.2.3"}
	c, err := deploy.LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	StampChart(c, s)
	if c.Metadata.Version != "1.2.3" || c.Metadata.AppVersion != "v1.2.3" {
		t.Fatalf("chart version %q appVersion %q", c.Metadata.Version, c.Metadata.AppVersion)
	}
	out, err := deploy.RenderChart(c, "capo", "capo-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"image: " + s.ImageRef(), "helm.sh/chart: capo-1.2.3", `app.kubernetes.io/version: "v1.2.3"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("rendered manifests lack %q", want)
		}
	}
}

// The packaged chart loads as Helm loads a .tgz, with its version, schema
// and README, and the manifests beside it name the release's image.
func TestChartPackage(t *testing.T) {
	s := Spec{Version: "v1.2.3", Out: t.TempDir()}
	if err := writeChart(s); err != nil {
		t.Fatal(err)
	}
	c, err := loader.Load(filepath.Join(s.Out, "capo-1.2.3.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Metadata.Version != "1.2.3" || c.Metadata.AppVersion != "v1.2.3" || c.Schema == nil {
		t.Fatalf("packaged chart: version %q appVersion %q, schema %d bytes", c.Metadata.Version, c.Metadata.AppVersion, len(c.Schema))
	}
	if _, err := deploy.RenderChart(c, "capo", "capo-system", map[string]any{"imag": 1}); err == nil {
		t.Fatal("the packaged chart accepts a misspelt value: no schema")
	}
	m, err := os.ReadFile(filepath.Join(s.Out, s.ManifestsFile()))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(m), "image: ghcr.io/capo-net/capo:v1.2.3"); n != 2 {
		t.Fatalf("the manifests name the release's image %d times, want 2 (agent, controller)", n)
	}
	if strings.Contains(string(m), "kind: ValidatingAdmissionPolicy") {
		t.Fatal("the manifests carry the admission policy, which Kubernetes before 1.30 refuses")
	}
	p, err := os.ReadFile(filepath.Join(s.Out, s.AdmissionFile()))
	if err != nil || !strings.Contains(string(p), "kind: ValidatingAdmissionPolicyBinding") {
		t.Fatalf("the admission policy's file: %v\n%s", err, p)
	}
}

func TestSumsListEveryOtherFile(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"b": "bee\n", "a": "ay\n", SumsFile: "stale"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeSums(dir); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, SumsFile))
	a, b := sha256.Sum256([]byte("ay\n")), sha256.Sum256([]byte("bee\n"))
	want := hex.EncodeToString(a[:]) + "  a\n" + hex.EncodeToString(b[:]) + "  b\n" // sha256sum's format
	if string(got) != want {
		t.Fatalf("SHA256SUMS:\n%s\nwant:\n%s", got, want)
	}
}

// The krew archive holds kubectl-capo and the LICENSE, the same bytes each
// time.
func TestPluginArchive(t *testing.T) {
	completions := map[string][]byte{"kubectl-capo.bash": []byte("# bash"), "kubectl-capo.zsh": []byte("# zsh")}
	a, err := pluginArchive([]byte("binary"), []byte("license"), completions)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pluginArchive([]byte("binary"), []byte("license"), completions)
	if !bytes.Equal(a, b) {
		t.Fatal("two archives of the same files differ")
	}
	zr, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		got[h.Name] = string(data)
		if h.Name == "kubectl-capo" && h.Mode != 0o755 {
			t.Errorf("kubectl-capo mode %o", h.Mode)
		}
	}
	if got["kubectl-capo"] != "binary" || got["LICENSE"] != "license" || got["completion/kubectl-capo.bash"] != "# bash" || len(got) != 4 {
		t.Fatalf("archive holds %v", got)
	}
}
