// Package fsync writes files that survive a crash: data is synced to disk
// before a file is closed, and a directory is synced after entries in it
// change.
package fsync

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes data to path (created with mode, or truncated) and syncs
// it before closing.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("create the file: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write the file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("flush the file to disk: %w", err)
	}
	return f.Close()
}

// Dir syncs a directory, making the entries created, renamed or removed in
// it durable.
func Dir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open the directory to sync it: %w", err)
	}
	defer d.Close()
	return d.Sync()
}

// Replace replaces path with data atomically and durably: it writes
// path+".tmp" (created with mode), syncs it, renames it over path and syncs
// the directory. A crash leaves the old content or the new one, never a
// mix; readers never see a partial file.
func Replace(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := WriteFile(tmp, data, mode); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("move the new file into place: %w", err)
	}
	return Dir(filepath.Dir(path))
}
