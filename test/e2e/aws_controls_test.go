//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// nodeControls drives a second rollout on the instance nodes through
// separate trellis processes, as a user does (issue item 7 on real
// kubelets): a rollout of the general group onto a third image paused
// after its canary, the status, an abort from another process, and a
// rollback onto prev, the image the nodes ran before. The watchers of the caller keep sampling
// throughout. It returns the instances it replaced (their shipped logs are
// checked with the rest).
func nodeControls(t *testing.T, env []string, def, prev string, awsNodes int, runFlags []string) []string {
	t.Helper()
	start := time.Now()
	image := strings.TrimSpace(run(t, env, "local", "aws", "image", fmt.Sprintf("e2e-c-%d", time.Now().Unix())))

	// One group: a canary pause is per group, and groups of one phase roll
	// together.
	out := run(t, env, append([]string{"ami", "rollout", "-f", def, "--image", image, "--yes", "--pause-after-canary", "--groups", "general"}, runFlags...)...)
	if !strings.Contains(out, "Paused") {
		t.Fatalf("rollout onto %s with --pause-after-canary: want Paused\n%s", image, out)
	}
	st := amiStatus(t, env, def)
	canary := replacedOf(st)
	if st.Status != rollout.StatusPaused || st.Image != image || len(canary) != 1 {
		t.Fatalf("after the canary: %s onto %s, replaced %v; want Paused onto %s with 1 replaced", st.Status, st.Image, canary, image)
	}
	// The canary is a node on the new image, Ready with the runtime; the
	// others still run prev.
	eventually(t, "the canary Ready on "+image, 12*time.Minute, func() (bool, string) {
		byImage, err := instanceImages(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return len(byImage[image]) == 1 && len(byImage[prev]) == awsNodes-1 && len(byImage) == 2, fmt.Sprint(byImage)
	})
	awaitInstanceNodes(t, awsNodes, "")
	if table := run(t, env, "ami", "status", "-f", def); !strings.Contains(table, string(rollout.StatusPaused)) {
		t.Errorf("ami status of the paused rollout: want %s\n%s", rollout.StatusPaused, table)
	}

	// No run holds a paused rollout: the abort takes effect at once.
	if out := run(t, env, "ami", "abort", "-f", def); !strings.Contains(out, "aborted") {
		t.Fatalf("ami abort of the paused rollout: %s", out)
	}
	if st := amiStatus(t, env, def); st.Status != rollout.StatusAborted {
		t.Fatalf("after ami abort: %s, want %s", st.Status, rollout.StatusAborted)
	}
	// An aborted rollout is not resumed.
	if b, err := command(env, append([]string{"ami", "resume", "-f", def}, runFlags...)...).CombinedOutput(); err == nil {
		t.Errorf("ami resume of an aborted rollout succeeded: want refused\n%s", b)
	}

	out = run(t, env, append([]string{"ami", "rollout", "-f", def, "--rollback", "--yes"}, runFlags...)...)
	if !strings.Contains(out, "back onto "+prev) {
		t.Fatalf("rollback: want back onto %s\n%s", prev, out)
	}
	st = amiStatus(t, env, def)
	back := replacedOf(st)
	if st.Status != rollout.StatusDone || st.Image != prev || len(back) != 1 {
		t.Errorf("after the rollback: %s onto %s, replaced %v; want Done onto %s with the canary's successor replaced", st.Status, st.Image, back, prev)
	}
	awaitInstanceNodes(t, awsNodes, prev)
	t.Logf("controls on instance nodes: canary onto %s paused, aborted, rolled back onto %s in %s", image, prev, time.Since(start).Round(time.Second))
	return append(canary, back...)
}

// amiStatus is `trellis ami status -o json`.
func amiStatus(t *testing.T, env []string, def string) *rollout.State {
	t.Helper()
	var st rollout.State
	if err := json.Unmarshal([]byte(run(t, env, "ami", "status", "-f", def, "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

func replacedOf(st *rollout.State) []string {
	var ids []string
	for _, g := range st.Groups {
		ids = append(ids, g.Replaced...)
	}
	return ids
}

// instanceImages is the instance nodes by their image label.
func instanceImages(ctx context.Context) (map[string][]string, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: instanceLabel})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, n := range nodes.Items {
		out[n.Labels[imageLabel]] = append(out[n.Labels[imageLabel]], n.Name)
	}
	return out, nil
}
