package rootfs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDirKeepsItsName: the cache directory of a package set is named as it
// was when the rootfs code lived in local/nodeimage, so rootfs made before
// the move are found, not made again.
func TestDirKeepsItsName(t *testing.T) {
	for _, tc := range []struct {
		packages []string
		want     string
	}{
		{Node, "/cache/node-rootfs/bookworm-9b23889268c1"},
		{ZooKeeper, "/cache/node-rootfs/bookworm-93454f92737c"},
	} {
		if got := Dir(Options{Cache: "/cache"}, tc.packages); got != tc.want {
			t.Errorf("the rootfs of %v is kept in %s, want %s (where local/nodeimage kept it)", tc.packages, got, tc.want)
		}
	}
}

// TestCommandImportsOnlyTheStandardLibrary: hack/rootfs runs beside the
// compiles of `make local` on a cold build cache; it must not compile
// Kubernetes or Docker libraries of its own to get there.
func TestCommandImportsOnlyTheStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "../../hack/rootfs").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/trellis-dev/trellis/hack/rootfs" && p != "github.com/trellis-dev/trellis/local/rootfs" {
			t.Errorf("hack/rootfs depends on %s", p)
		}
	}
}

// TestKilledBuildLeavesNothingMade: a debootstrap killed with SIGKILL
// leaves no directory that counts as made; the next build makes it.
func TestKilledBuildLeavesNothingMade(t *testing.T) {
	bin := t.TempDir()
	// Stand-ins for debootstrap (the real one takes minutes and a mirror):
	// one killed half-way through, one that finishes. Named as fakes.
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(bin, "debootstrap"), []byte("#!/bin/sh\n# fake-debootstrap\ntarget=$4\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	o := Options{Cache: t.TempDir()}
	dir := Dir(o, ZooKeeper)

	write("mkdir -p $target/etc && echo half > $target/etc/half\necho unpacking\nkill -9 $$\n")
	if _, err := Build(context.Background(), o, ZooKeeper); err == nil || !strings.Contains(err.Error(), "debootstrap") || !strings.Contains(err.Error(), "unpacking") {
		t.Fatalf("a killed debootstrap gave %v, want its error with its output", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("after a killed build, %s exists (%v): it would count as made", dir, err)
	}

	write("mkdir -p $target/etc $target/var/cache/apt/archives && echo done > $target/etc/done\n")
	got, err := Build(context.Background(), o, ZooKeeper)
	if err != nil {
		t.Fatal(err)
	}
	if got != dir {
		t.Fatalf("built %s, want %s", got, dir)
	}
	for _, f := range []string{".trellis-complete", "etc/done"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the made rootfs lacks %s: %v", f, err)
		}
	}
	for _, f := range []string{"etc/half", "var/cache/apt/archives"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("the made rootfs has %s", f)
		}
	}
	// Made: the next call does not run debootstrap at all.
	write("exit 1\n")
	if again, err := Build(context.Background(), o, ZooKeeper); err != nil || again != dir {
		t.Fatalf("a made rootfs was built again: %s, %v", again, err)
	}
}
