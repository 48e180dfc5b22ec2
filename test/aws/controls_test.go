package aws

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/internal/awsemu"
)

// groupInstances lists each autoscaling group's instance ids.
func groupInstances(t *testing.T, c *awsemu.Clients) map[string][]string {
	t.Helper()
	out, err := c.ASG.DescribeAutoScalingGroups(context.Background(), &autoscaling.DescribeAutoScalingGroupsInput{})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]string{}
	for _, g := range out.AutoScalingGroups {
		for _, in := range g.Instances {
			m[awssdk.ToString(g.AutoScalingGroupName)] = append(m[awssdk.ToString(g.AutoScalingGroupName)], awssdk.ToString(in.InstanceId))
		}
	}
	return m
}

// images are the images the group's instances run, by instance.
func images(t *testing.T, c *awsemu.Clients, group string) map[string]string {
	t.Helper()
	m, err := c.GroupImages(context.Background(), group+"."+clusterName)
	if err != nil || len(m) == 0 {
		t.Fatalf("instances of %s: %v, %v", group, m, err)
	}
	return m
}

func rolloutState(t *testing.T, trellis func(...string) result, def string) *rollout.State {
	t.Helper()
	r := trellis("ami", "status", "-f", def, "-o", "json")
	if r.code != 0 {
		t.Fatalf("ami status: %s", r)
	}
	var st rollout.State
	if err := json.Unmarshal([]byte(r.out), &st); err != nil {
		t.Fatalf("ami status -o json: %v\n%s", err, r.out)
	}
	return &st
}

// controls drives one rollout through separate trellis processes, as a
// user does: a pause after the canary, status, resume, an abort from a
// second process while the first runs, a rollback, and a SIGKILL whose lock
// holds off a second run until it expires.
func controls(t *testing.T, c *awsemu.Clients, env []string, def string) {
	ctx := context.Background()
	trellis := func(args ...string) result { return run(t, env, trellisBin, args...) }
	amiB, err := c.Image(ctx, "trellis-node-b", "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	amiC, err := c.Image(ctx, "trellis-node-c", "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	roll := []string{"ami", "rollout", "-f", def, "--yes", "--cloud-only", "--gate-timeout", "2m", "--groups", "general"}

	// Pause after the canary: the process ends, the state says Paused.
	r := trellis(append(roll, "--image", amiB, "--pause-after-canary")...)
	if r.code != 0 || !strings.Contains(r.out, "Paused") {
		t.Fatalf("rollout with --pause-after-canary: %s", r)
	}
	st := rolloutState(t, trellis, def)
	if g := st.Groups["general"]; st.Status != rollout.StatusPaused || len(g.Replaced) != 1 || len(g.Old) != 2 {
		t.Fatalf("after the canary: %s, general %+v; want Paused with 1 of 2 replaced", st.Status, g)
	}
	if r := trellis("ami", "status", "-f", def); r.code != 0 || !strings.Contains(r.out, "general  1/2") {
		t.Errorf("ami status: %s", r)
	}
	// Node gates cannot go with a cloud-only run.
	if r := trellis(append(roll, "--image", amiC, "--check-http", "http://127.0.0.1:1/")...); r.code == 0 || !strings.Contains(r.stderr, "gate on nodes") {
		t.Errorf("--check-http with --cloud-only: %s", r)
	}
	// Resume in another process: no flags needed for a cloud-only rollout.
	if r := trellis("ami", "resume", "-f", def); r.code != 0 || !strings.Contains(r.out, "Done") {
		t.Fatalf("ami resume: %s", r)
	}
	for id, img := range images(t, c, "general") {
		if img != amiB {
			t.Errorf("after the resumed rollout, %s runs %s, want %s", id, img, amiB)
		}
	}

	// Abort from a second process while the first bakes between batches.
	cmd := exec.Command(trellisBin, append(roll, "--image", amiC, "--canary=false", "--max-surge", "1", "--bake-time", "5s")...)
	cmd.Env = append(cmd.Environ(), env...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() bool {
		st := rolloutState(t, trellis, def)
		return st.Image == amiC && len(st.Groups["general"].Replaced) >= 1
	})
	if r := trellis("ami", "abort", "-f", def); r.code != 0 || !strings.Contains(r.out, "abort requested") {
		t.Fatalf("ami abort: %s", r)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the aborted rollout's process: %v\n%s", err, out.String())
	}
	st = rolloutState(t, trellis, def)
	if st.Status != rollout.StatusAborted || len(st.Groups["general"].Replaced) != 1 {
		t.Fatalf("after abort: %s with %d replaced, want Aborted after the first batch\n%s", st.Status, len(st.Groups["general"].Replaced), out.String())
	}

	// Roll back onto the image before the aborted rollout.
	if r := trellis("ami", "rollout", "-f", def, "--rollback", "--yes", "--cloud-only", "--gate-timeout", "2m"); r.code != 0 || !strings.Contains(r.out, "back onto "+amiB) {
		t.Fatalf("rollback: %s", r)
	}
	for id, img := range images(t, c, "general") {
		if img != amiB {
			t.Errorf("after the rollback, %s runs %s, want %s", id, img, amiB)
		}
	}

	// SIGKILL mid-rollout: the lock holds off another run until it expires.
	cmd = exec.Command(trellisBin, append(roll, "--image", amiC, "--canary=false", "--bake-time", "1m", "--lock-ttl", "15s")...)
	cmd.Env = append(cmd.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() bool {
		st := rolloutState(t, trellis, def)
		return st.Image == amiC && st.Status == rollout.StatusRunning && len(st.Groups["general"].Replaced) >= 1
	})
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	killed := time.Now()
	if r := trellis("ami", "resume", "-f", def); r.code == 0 || !strings.Contains(r.stderr, "another rollout holds the lock") {
		t.Fatalf("resume right after the kill: %s; want the lock refused", r)
	}
	st = rolloutState(t, trellis, def)
	time.Sleep(time.Until(st.Lock.Expires.Add(time.Second)))
	if r := trellis("ami", "resume", "-f", def); r.code != 0 || !strings.Contains(r.out, "Done") {
		t.Fatalf("resume after the lock expired (%s after the kill): %s", time.Since(killed).Round(time.Second), r)
	}
	st = rolloutState(t, trellis, def)
	if g := st.Groups["general"]; len(g.Replaced) != 2 || len(g.Old) != 2 {
		t.Errorf("after the kill and resume: %+v; want both old instances replaced once", g)
	}
	for id, img := range images(t, c, "general") {
		if img != amiC {
			t.Errorf("after the resumed rollout, %s runs %s, want %s", id, img, amiC)
		}
	}
}

func waitFor(t *testing.T, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not so after %s", d)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
