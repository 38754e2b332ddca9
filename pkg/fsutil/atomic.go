// Package fsutil writes files so that a reader or a crash never sees half of
// one: temp file in the same directory, fsync, rename, fsync the directory.
package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// TempSuffix marks in-flight files; it is not .conf/.conflist/.json so a
// runtime scanning the directory never loads one.
const TempSuffix = ".capo-tmp"

// WriteFileAtomic replaces path with data, durably, with the given mode.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*"+TempSuffix)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("renaming into %s: %w", path, err)
	}
	ok = true
	return SyncDir(dir)
}

// SyncDir makes a rename or unlink in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing dir %s: %w", dir, err)
	}
	return nil
}
