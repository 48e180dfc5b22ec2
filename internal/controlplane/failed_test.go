package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A control plane whose apiserver cannot start returns the error, not a
// nil-pointer panic, and stops the etcd it had started: the deferred
// cleanup once called Stop on the nil that `return nil, err` leaves.
func TestIntegrationStartFailureStopsEtcd(t *testing.T) {
	dir := t.TempDir()
	cp, err := Start(dir, Options{APIServerFlags: []string{"--no-such-flag=1"}})
	if err == nil {
		cp.Stop()
		t.Fatal("an apiserver with an unknown flag started")
	}
	t.Logf("Start: %v", err)
	if n := processesWith("--data-dir=" + filepath.Join(dir, "etcd")); n != 0 {
		t.Fatalf("%d etcd processes of the failed control plane are still running", n)
	}
}

// processesWith counts the running processes whose command line has arg.
func processesWith(arg string) int {
	n := 0
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if a == arg {
				n++
				break
			}
		}
	}
	return n
}
