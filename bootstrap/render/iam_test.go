package render

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

// TestNodePolicy: with an S3 config base the nodes may get and put the
// AMI rollout's two objects (the gateway's console) and nothing else of
// the state store; netd's statements stay as ToKops renders them.
func TestNodePolicy(t *testing.T) {
	got, err := NodePolicy("s3://trellis-state/clusters/prod-us-east-1.k8s.trellis.example", "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, filepath.Join("testdata", "node-policy.s3.json"), []byte(got+"\n"))
	// kops takes it as the nodes' additional policy, as Prepare sets it.
	d, err := definition.Load("../../clusters/prod-us-east-1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ToKops(d.ClusterDefinition)
	if err != nil {
		t.Fatal(err)
	}
	spec.Cluster.Spec.AdditionalPolicies["node"] = got
	if err := Validate(spec, false, nil); err != nil {
		t.Errorf("kops refuses the node policy: %v", err)
	}
	var statements []struct {
		Sid      string
		Action   any
		Resource any
	}
	if err := json.Unmarshal([]byte(got), &statements); err != nil {
		t.Fatal(err)
	}
	for _, s := range statements {
		b, _ := json.Marshal(s.Resource)
		if strings.Contains(string(b), "s3:::") && !strings.Contains(string(b), "/trellis/ami-rollout") {
			t.Errorf("statement %s reaches the state store beyond the rollout: %s", s.Sid, b)
		}
		if a, _ := json.Marshal(s.Action); strings.Contains(string(a), "s3:*") || strings.Contains(string(a), "s3:Delete") {
			t.Errorf("statement %s allows %s", s.Sid, a)
		}
	}
	gov, err := NodePolicy("s3://b/c", "us-gov-west-1")
	if err != nil || !strings.Contains(gov, `"arn:aws-us-gov:s3:::b/c/trellis/ami-rollout.json"`) {
		t.Errorf("us-gov-west-1: %v\n%s", err, gov)
	}
	for _, base := range []string{"file:///tmp/state/c", "memfs://tests/c"} {
		if p, err := NodePolicy(base, "us-east-1"); err != nil || p != netdPolicy() {
			t.Errorf("%s: want netd's policy alone, got %v\n%s", base, err, p)
		}
	}
	if _, err := NodePolicy("s3://bucket-only", "us-east-1"); err == nil {
		t.Error("s3://bucket-only: want an error (no cluster folder)")
	}
}
