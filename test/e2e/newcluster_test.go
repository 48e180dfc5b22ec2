//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestLocalUpNewCluster is a newcomer's first `make local`: trellis local
// up creates a cluster that did not exist, so no pod can run until the
// addons bring the network up. The suite's own cluster is reused run after
// run (and CI's starts from a snapshot that holds it), so only this test
// sees a new one: a step that waits for a pod before the addons step
// hangs here until its timeout.
func TestLocalUpNewCluster(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const name = "trellis-e2e-new"
	def, err := os.ReadFile(filepath.Join(root, definition))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(def), "name: "+cluster+"\n", "name: "+name+"\n", 1)
	text = strings.Replace(text, "base: base/platform.yaml\n", "base: "+filepath.Join(root, "clusters", "base", "platform.yaml")+"\n", 1)
	if !strings.Contains(text, "name: "+name+"\n") || strings.Contains(text, "base: base/") {
		t.Fatalf("%s no longer has the name and base lines this test rewrites", definition)
	}
	path := filepath.Join(dir, "new.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	trellis := func(out io.Writer, args ...string) error {
		cmd := exec.Command(filepath.Join(root, "bin", "trellis"), args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, out, out
		return cmd.Run()
	}
	t.Cleanup(func() {
		var out bytes.Buffer
		if err := trellis(&out, "local", "down", "-f", path, "--kubeconfig", kc); err != nil {
			t.Errorf("trellis local down %s: %v\n%s", name, err, out.String())
		}
	})
	var log bytes.Buffer
	start := time.Now()
	err = trellis(io.MultiWriter(os.Stdout, &log), "local", "up", "-f", path, "--kubeconfig", kc,
		"--gateway-context", filepath.Join(dir, "gateway-context"))
	took := time.Since(start).Round(time.Second)
	if err != nil {
		t.Fatalf("trellis local up on a new cluster failed after %s: %v", took, err)
	}
	t.Logf("trellis local up created %s in %s", name, took)
	for _, want := range []string{"✓ cluster", "✓ addons", "✓ console sign-in"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("trellis local up printed no %q line", want)
		}
	}
	if !strings.Contains(log.String(), "creating the kind cluster") {
		t.Errorf("trellis local up did not say it created a cluster:\n%s", log.String())
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	c := kubernetes.NewForConfigOrDie(rc)
	eventually(t, "every addon of the new cluster ready", 3*time.Minute, func() (bool, string) { return addonsReadyIn(ctx, c) })
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ready []string
	for _, n := range nodes.Items {
		if nodeReady(&n) {
			ready = append(ready, n.Name)
		}
	}
	if len(ready) != 2 {
		t.Errorf("%d of %d nodes Ready (%s), want 2", len(ready), len(nodes.Items), strings.Join(ready, ", "))
	}
	fmt.Printf("e2e: a new local cluster: up in %s, %d nodes Ready\n", took, len(ready))
}
