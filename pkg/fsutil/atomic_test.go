package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	write := WriteFileAtomic
	dir := t.TempDir()
	p := filepath.Join(dir, "a.json")
	for _, body := range []string{"one", "two, longer"} {
		if err := write(p, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != body {
			t.Fatalf("read %q, %v", got, err)
		}
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", fi.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temp files left: %v", entries)
	}
	if err := write(filepath.Join(dir, "missing", "b"), nil, 0o600); err == nil {
		t.Fatal("want an error for a missing directory")
	}
}
