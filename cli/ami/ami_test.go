package ami

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/cli/internal/streams"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := NewCommand(streams.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	err := cmd.ExecuteContext(context.Background())
	return out.String() + errb.String(), err
}

func TestStatusPauseAbort(t *testing.T) {
	state := "file://" + t.TempDir()
	def := "../../clusters/staging-us-west-2.yaml"
	if _, err := run(t, "status", "-f", def, "--state", state); !errors.Is(err, rollout.ErrNoRollout) {
		t.Fatalf("status without a rollout: %v", err)
	}
	store, err := rollout.NewVFSStore(state, "staging-us-west-2.k8s.trellis.example")
	if err != nil {
		t.Fatal(err)
	}
	st := &rollout.State{ID: "r1", Cluster: "staging-us-west-2.k8s.trellis.example", Image: "ami-new", Status: rollout.StatusRunning,
		// A run holds it: an abort is a request the run honours.
		Lock: rollout.Lock{Owner: "host/1", Expires: time.Now().Add(time.Hour)}, Groups: map[string]*rollout.GroupProgress{
			"general": {Name: "general", Old: []string{"i-1", "i-2", "i-3"}, Replaced: []string{"i-1"}, Batch: &rollout.Batch{N: 2, Old: []string{"i-2"}, Step: rollout.StepDrain}, Blocked: "shop/web (for 12s)"},
		}}
	if err := store.Save(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "status", "-f", def, "--state", state)
	if err != nil || !strings.Contains(out, "general  1/3       batch 2: Drain  shop/web (for 12s)") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	out, err = run(t, "status", "-f", def, "--state", state, "-o", "json")
	var got rollout.State
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || got.Groups["general"].Batch.Step != rollout.StepDrain {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		verb string
		want rollout.Status
	}{{"pause", rollout.StatusPaused}, {"abort", rollout.StatusAborting}} {
		if out, err := run(t, tc.verb, "-f", def, "--state", state); err != nil {
			t.Fatalf("%s: %v\n%s", tc.verb, err, out)
		}
		s, _ := store.Load(context.Background())
		if s.Status != tc.want {
			t.Errorf("after %s: status %s, want %s", tc.verb, s.Status, tc.want)
		}
	}
	if _, err := run(t, "rollout", "-f", "../../clusters/local.yaml", "--state", state, "--image", "ami-1"); err == nil || !strings.Contains(err.Error(), "AWS clusters") {
		t.Errorf("rollout of a kind cluster: %v", err)
	}
}
