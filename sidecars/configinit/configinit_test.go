package configinit

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRenderConfigMapVolume(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "config")
	// A ConfigMap volume: files are links through ..data.
	data := filepath.Join(src, "..2026_11_22")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "app.yaml"), []byte("service: ${TRELLIS_SERVICE}\npod: ${POD_NAME}\nkeep: ${HOME} $$ ${UNSET}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..2026_11_22", filepath.Join(src, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/app.yaml", filepath.Join(src, "app.yaml")); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TRELLIS_SERVICE": "hello", "POD_NAME": "hello-0", "HOME": "/root"}
	files, err := Render(src, dst, func(k string) string { return env[k] }, []string{"TRELLIS_SERVICE=hello", "POD_NAME=hello-0", "HOME=/root"})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Errorf("files = %v, want app.yaml and identity.env", files)
	}
	got, _ := os.ReadFile(filepath.Join(dst, "app.yaml"))
	if want := "service: hello\npod: hello-0\nkeep: ${HOME} $$ ${UNSET}\n"; string(got) != want {
		t.Errorf("app.yaml = %q, want %q", got, want)
	}
	id, _ := os.ReadFile(filepath.Join(dst, "identity.env"))
	if want := "POD_NAME=hello-0\nTRELLIS_SERVICE=hello\n"; string(id) != want {
		t.Errorf("identity.env = %q, want %q", id, want)
	}
	if _, err := os.Stat(filepath.Join(dst, "..data")); !os.IsNotExist(err) {
		t.Error("hidden ConfigMap entries must not be copied")
	}
}

func TestRenderNoSource(t *testing.T) {
	dst := t.TempDir()
	files, err := Render(filepath.Join(dst, "missing"), dst, os.Getenv, nil)
	if err != nil || len(files) != 1 {
		t.Fatalf("Render without a source = %v, %v; want identity.env only", files, err)
	}
}
