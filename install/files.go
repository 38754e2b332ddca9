package install

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/capo-net/capo/pkg/fsutil"
)

// RuntimeConfig is the file the runtime uses: the lowest-sorted .conf,
// .conflist or .json in the CNI conf dir, as kubelet and containerd choose.
func RuntimeConfig(confDir string) (string, error) {
	entries, err := os.ReadDir(confDir)
	if err != nil {
		return "", fmt.Errorf("reading the CNI conf dir: %w", err)
	}
	var names []string
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if !e.IsDir() && (ext == ".conf" || ext == ".conflist" || ext == ".json") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no CNI config in %s yet (is calico-node running?)", confDir)
	}
	slices.Sort(names)
	return filepath.Join(confDir, names[0]), nil
}

// editFile rewrites path through edit, atomically and with its mode kept.
// It reports whether the content changed.
func editFile(path string, edit func([]byte) ([]byte, error)) (bool, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	out, err := edit(old)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	if bytes.Equal(old, out) {
		return false, nil
	}
	return true, fsutil.WriteFileAtomic(path, out, fi.Mode().Perm())
}

// copyBinary installs src as dst: written beside it and renamed over it, so
// a plugin being exec'd never sees half a file and an old one still running
// keeps its inode (no "text file busy"). Identical content is left alone.
func copyBinary(src, dst string) (bool, error) {
	want, err := fileSum(src)
	if err != nil {
		return false, fmt.Errorf("source binary: %w", err)
	}
	if have, err := fileSum(dst); err == nil && bytes.Equal(have, want) {
		return false, nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return false, err
	}
	return true, fsutil.WriteFileAtomic(dst, data, 0o755)
}

func fileSum(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
