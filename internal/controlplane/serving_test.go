package controlplane

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A port taken between its choice and the component's bind (another test's
// process got it) costs a restart on another port, not the control plane:
// the first port offered to kube-controller-manager is held by the test,
// the real binary exits with "address already in use", and it runs on the
// second.
func TestIntegrationComponentPortTakenMeanwhile(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port
	offered := 0
	orig := servingPort
	servingPort = func() (int, error) {
		offered++
		if offered == 1 {
			return taken, nil
		}
		return orig()
	}
	defer func() { servingPort = orig }()

	cp, err := Start(t.TempDir(), Options{ControllerManager: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	if offered != 2 {
		t.Fatalf("kube-controller-manager was offered %d ports, want 2 (the held one, then a free one)", offered)
	}
	log, err := os.ReadFile(filepath.Join(cp.Dir, "kube-controller-manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "address already in use") {
		t.Fatalf("kube-controller-manager's log does not show the first bind failing:\n%s", log)
	}
	if cp.cm == nil || cp.cm.exited() {
		t.Fatalf("kube-controller-manager is not running:\n%s", cp.Logs(20))
	}
	// The profiles the benchmarks take reach each component where it
	// serves: kube-controller-manager's on the port it ended up on.
	for name, profile := range map[string]func(context.Context, string, time.Duration) error{
		"kube-apiserver": cp.APIServerProfile, "kube-controller-manager": cp.ControllerManagerProfile,
	} {
		path := filepath.Join(t.TempDir(), "cpu.pprof")
		if err := profile(context.Background(), path, time.Second); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // pprof's gzip
			t.Fatalf("%s's profile is not a gzipped pprof profile: %q", name, b[:min(len(b), 64)])
		}
	}
}
