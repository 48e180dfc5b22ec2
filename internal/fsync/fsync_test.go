package fsync

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReplace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	for _, data := range []string{"first, and longer\n", "second\n"} {
		if err := Replace(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("after Replace(%q): %q, %v", data, got, err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left: %v", err)
	}
}

func TestReplaceFailsInMissingDir(t *testing.T) {
	if err := Replace(filepath.Join(t.TempDir(), "no", "such"), []byte("x"), 0o644); err == nil {
		t.Fatal("Replace into a missing directory succeeded")
	}
}
