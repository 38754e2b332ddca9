package image

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The image says what it is, which commit it was built from and under
// which license, as scanners and registries read the OCI labels; the
// Dockerfile's build says the same.
func TestImageLabels(t *testing.T) {
	l := Config("v1.2.3", "0123abcd").Labels
	for k, want := range map[string]string{
		"org.opencontainers.image.version":     "v1.2.3",
		"org.opencontainers.image.revision":    "0123abcd",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.description": Description,
		"org.opencontainers.image.source":      "https://github.com/capo-net/capo",
	} {
		if l[k] != want {
			t.Errorf("label %s = %q, want %q", k, l[k], want)
		}
	}
	if _, ok := Config("dev", "").Labels["org.opencontainers.image.revision"]; ok {
		t.Error("a revision label without a revision")
	}
	df, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range Config("${VERSION}", "${REVISION}").Labels {
		if !strings.Contains(string(df), k+`="`+v+`"`) {
			t.Errorf("the Dockerfile has no LABEL %s=%q", k, v)
		}
	}
}
