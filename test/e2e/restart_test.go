//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLocalUpAfterNodesStopped stops the cluster's node containers, as a
// host or Docker restart does, and runs trellis local up again: it must
// start them, wait for the restarted apiserver to be ready (its RBAC
// authorizer refuses even the cluster admin until its informers sync), and
// leave every node and addon ready. It runs last (its file sorts last) and
// leaves the cluster as it found it, reconnected.
func TestLocalUpAfterNodesStopped(t *testing.T) {
	ctx := context.Background()
	names, err := exec.Command("docker", "ps", "-q", "--filter", "label=io.x-k8s.kind.cluster="+cluster).Output()
	if err != nil {
		t.Fatal(err)
	}
	ids := strings.Fields(string(names))
	if len(ids) != 2 {
		t.Fatalf("%d running node containers of %s, want 2", len(ids), cluster)
	}
	if out, err := exec.Command("docker", append([]string{"stop"}, ids...)...).CombinedOutput(); err != nil {
		t.Fatalf("docker stop: %v: %s", err, out)
	}
	start := time.Now()
	var log bytes.Buffer
	if err := localUp(io.MultiWriter(os.Stdout, &log), io.MultiWriter(os.Stderr, &log)); err != nil {
		t.Fatalf("trellis local up after the nodes stopped: %v", err)
	}
	t.Logf("trellis local up with stopped nodes took %s", time.Since(start).Round(time.Second))
	if n := strings.Count(log.String(), "starting a stopped node"); n != 2 {
		t.Errorf("trellis local up started %d stopped nodes, want 2", n)
	}
	if err := connect(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both nodes Ready", 3*time.Minute, func() (bool, string) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var notReady []string
		for _, n := range nodes.Items {
			if !nodeReady(&n) {
				notReady = append(notReady, n.Name)
			}
		}
		return len(nodes.Items) == 2 && len(notReady) == 0, strings.Join(notReady, ", ")
	})
	eventually(t, "every addon ready after the restart", 3*time.Minute, func() (bool, string) { return addonsReady(ctx) })
}
