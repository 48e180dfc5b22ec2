package controlplane

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
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
	// serves: kube-controller-manager's on the port it ended up on. A
	// profile names the binary it was taken of (its main mapping).
	profiles := map[string]func(context.Context, string, time.Duration) error{
		"kube-apiserver": cp.APIServerProfile, "kube-controller-manager": cp.ControllerManagerProfile,
	}
	for name, profile := range profiles {
		path := filepath.Join(t.TempDir(), "cpu.pprof")
		if err := profile(context.Background(), path, time.Second); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s's profile is not gzipped, as pprof's are: %v", name, err)
		}
		raw, err := io.ReadAll(zr)
		f.Close()
		if err != nil {
			t.Fatalf("%s's profile: %v", name, err)
		}
		for other := range profiles {
			if got := bytes.Contains(raw, []byte("/"+other)); got != (other == name) {
				t.Errorf("%s's profile names the binary %s: %v, want %v", name, other, got, other == name)
			}
		}
	}
}
