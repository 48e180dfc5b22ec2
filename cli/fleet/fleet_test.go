package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/cli"
	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/fleet/karmada"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Main(context.Background(), args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// startFleet runs a Karmada control plane and a member control plane for
// the test, and points the fleet commands at the former.
func startFleet(ctx context.Context, t *testing.T, o karmada.Options) (*karmada.ControlPlane, *cluster.ControlPlane) {
	t.Helper()
	k, err := karmada.Start(ctx, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(k.Logs(20))
		}
		k.Stop()
	})
	member := cluster.Start(t, cluster.Options{ControllerManager: true})
	t.Setenv("TRELLIS_FLEET_KUBECONFIG", k.Kubeconfig)
	return k, member
}

// The fleet commands against a real Karmada and a member control plane:
// install, join from a definition, status, place; and their failures.
func TestIntegrationFleetCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, member := startFleet(ctx, t, karmada.Options{Failover: true})

	code, out, stderr := run(t, "fleet", "install")
	if code != 0 || !strings.Contains(out, "fleet bundle applied: 14 objects") {
		t.Fatalf("install: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = run(t, "fleet", "join", "-f", "../../clusters/prod-us-east-1.yaml", "--kubeconfig", member.Kubeconfig, "--wait", "90s")
	if code != 0 || !strings.Contains(out, "prod-us-east-1 joined the fleet") {
		t.Fatalf("join: exit %d\n%s%s", code, out, stderr)
	}
	// Joining again refreshes; it does not fail.
	if code, out, stderr = run(t, "fleet", "join", "-f", "../../clusters/prod-us-east-1.yaml", "--kubeconfig", member.Kubeconfig, "--wait", "0"); code != 0 {
		t.Fatalf("join again: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = run(t, "fleet", "status", "-o", "json")
	if code != 0 {
		t.Fatalf("status: exit %d\n%s%s", code, out, stderr)
	}
	var members []fleet.MemberStatus
	if err := json.Unmarshal([]byte(out), &members); err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 || members[0].Name != "prod-us-east-1" || !members[0].Ready || members[0].Region != "us-east-1" ||
		strings.Join(members[0].Zones, ",") != "us-east-1a,us-east-1b,us-east-1c" || members[0].Kubernetes == "" {
		t.Fatalf("status: %+v", members)
	}
	code, out, _ = run(t, "fleet", "status")
	if code != 0 || !strings.Contains(out, "prod-us-east-1") || !strings.Contains(out, "True") {
		t.Fatalf("status table: %s", out)
	}
	code, out, stderr = run(t, "fleet", "place", "-f", "../../config/samples/fleet/placements.yaml")
	if code != 0 || !strings.Contains(out, "propagationpolicy shop/trellis-web applied") {
		t.Fatalf("place: exit %d\n%s%s", code, out, stderr)
	}

	// Failures name what is wrong and change nothing.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: fleet.trellis.dev/v1alpha1\nkind: Placement\nmetadata: {name: x, namespace: shop}\nspec:\n  spread: weighted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(t, "fleet", "place", "-f", bad)
	if code == 0 || !strings.Contains(stderr, bad+":5: placement shop/x: spec.weights") {
		t.Fatalf("bad placement: exit %d: %s", code, stderr)
	}
	code, _, stderr = run(t, "fleet", "join", "-f", "../../clusters/nope.yaml", "--kubeconfig", member.Kubeconfig)
	if code == 0 || !strings.Contains(stderr, "nope.yaml") {
		t.Fatalf("join of a missing definition: exit %d: %s", code, stderr)
	}
	code, _, stderr = run(t, "fleet", "status", "--fleet-kubeconfig", filepath.Join(t.TempDir(), "none"))
	if code == 0 || !strings.Contains(stderr, "kubeconfig") {
		t.Fatalf("status without a fleet: exit %d: %s", code, stderr)
	}
}
