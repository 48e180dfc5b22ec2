package netd

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseProviderID(t *testing.T) {
	zone, id, err := ParseProviderID("aws:///us-east-1a/i-0123456789abcdef0")
	if err != nil || zone != "us-east-1a" || id != "i-0123456789abcdef0" {
		t.Fatalf("got %q %q %v", zone, id, err)
	}
	for _, bad := range []string{"", "kind://docker/x/y", "aws:///us-east-1a", "aws:///us-east-1a/node-1", "aws://us-east-1a/i-1"} {
		if _, _, err := ParseProviderID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestInstallPluginReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "new"), filepath.Join(dir, "trellis-cni")
	if err := os.WriteFile(src, []byte("new plugin"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, []byte("old plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A process holding the old file keeps reading the old bytes.
	old, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := InstallPlugin(src, dst); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(dst)
	fi, _ := os.Stat(dst)
	if string(b) != "new plugin" || fi.Mode().Perm() != 0o755 {
		t.Fatalf("installed %q mode %v", b, fi.Mode())
	}
	held := make([]byte, 10)
	if _, err := old.ReadAt(held, 0); err != nil || string(held) != "old plugin" {
		t.Fatalf("the running plugin's file changed under it: %q %v", held, err)
	}
	if err := InstallPlugin(filepath.Join(dir, "missing"), dst); err == nil {
		t.Fatal("installing a missing plugin succeeded")
	}
}
