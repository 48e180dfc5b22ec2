package statestore

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/kops/util/pkg/vfs"
)

func TestSnapshotRestore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := "file://" + dir
	write := func(rel, data string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("c1/config", "cluster v1")
	write("c1/instancegroup/nodes", "ig v1")
	write("c1/trellis/pki/root.pem", "root")
	write("c2/config", "other cluster")
	write("c1x/config", "a cluster whose name has c1 as prefix")

	snap, err := Take(ctx, store, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Files(); len(got) != 3 {
		t.Fatalf("snapshot holds %v, want the three files of c1", got)
	}
	write("c1/config", "cluster v2")
	write("c1/instancegroup/gpu", "new group")
	write("c1/secrets/token", "new secret")
	if err := os.Remove(filepath.Join(dir, "c1", "trellis", "pki", "root.pem")); err != nil {
		t.Fatal(err)
	}
	write("c2/config", "other cluster changed meanwhile")
	if err := snap.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{
		"c1/config": "cluster v1", "c1/instancegroup/nodes": "ig v1", "c1/trellis/pki/root.pem": "root",
		"c2/config": "other cluster changed meanwhile", "c1x/config": "a cluster whose name has c1 as prefix",
	} {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", rel, got, err, want)
		}
	}
	for _, rel := range []string{"c1/instancegroup/gpu", "c1/secrets/token"} {
		if _, err := os.Stat(filepath.Join(dir, rel)); !os.IsNotExist(err) {
			t.Errorf("%s survived the restore: %v", rel, err)
		}
	}
}

func TestSnapshotOfMissingClusterRemovesEverything(t *testing.T) {
	ctx := context.Background()
	store := "memfs://snap-test"
	vfs.Context.ResetMemfsContext(true)
	snap, err := Take(ctx, store, "new")
	if err != nil {
		t.Fatal(err)
	}
	base, err := vfs.Context.BuildVfsPath(store)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"config", "instancegroup/nodes", "trellis/pki/root-key.pem"} {
		if err := base.Join("new", rel).WriteFile(ctx, bytes.NewReader([]byte(rel)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := snap.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	left, err := base.Join("new").ReadTree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range left {
		if _, err := p.ReadFile(ctx); !os.IsNotExist(err) {
			t.Errorf("restore of an empty snapshot left %s: %v", p.Path(), err)
		}
	}
}

func TestSnapshotRefusesBadClusterName(t *testing.T) {
	if _, err := Take(context.Background(), "memfs://x", "../etc"); err == nil {
		t.Error("a cluster name with a slash was accepted")
	}
}
