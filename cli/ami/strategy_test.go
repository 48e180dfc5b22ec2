package ami

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

func TestStrategyFromDefinition(t *testing.T) {
	ig := func(min int32, surge, unavailable string) definition.InstanceGroup {
		return definition.InstanceGroup{Name: "g", MinSize: &min, MaxSurge: surge, MaxUnavailable: unavailable}
	}
	for _, tc := range []struct {
		name                   string
		ig                     definition.InstanceGroup
		flagSurge, flagUnavail int
		want                   rollout.Strategy
		err                    string
	}{
		{"unset: 10% of the minimum, at least 1", ig(30, "", ""), -1, -1, rollout.Strategy{MaxSurge: 3}, ""},
		{"gpu: no surge, one unavailable", ig(8, "0", "1"), -1, -1, rollout.Strategy{MaxUnavailable: 1}, ""},
		{"percent surge rounds up", ig(10, "25%", "0"), -1, -1, rollout.Strategy{MaxSurge: 3}, ""},
		{"percent unavailable rounds down", ig(10, "0", "25%"), -1, -1, rollout.Strategy{MaxUnavailable: 2}, ""},
		{"flags win", ig(8, "0", "1"), 2, -1, rollout.Strategy{MaxSurge: 2}, ""},
		{"in place by flag", ig(8, "1", "0"), 0, 2, rollout.Strategy{MaxUnavailable: 2}, ""},
		{"no progress", ig(8, "0", "0"), -1, -1, rollout.Strategy{}, "both 0"},
		{"bad value", ig(8, "lots", "0"), -1, -1, rollout.Strategy{}, "maxSurge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &rolloutOptions{MaxSurge: tc.flagSurge, MaxUnavailable: tc.flagUnavail}
			got, err := o.strategy(tc.ig)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestValidateCheckIsClusterValidate(t *testing.T) {
	l, err := definition.Load("../../clusters/staging-us-west-2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// An empty cluster: `cluster validate` fails it (no nodes, no addons), and so does the gate.
	err = validateCheck(fake.NewClientset(), l.ClusterDefinition)(context.Background(), &corev1.Node{})
	if err == nil || !strings.Contains(err.Error(), "cluster validation: ") {
		t.Fatalf("gate on an empty cluster: %v, want the validation's failure", err)
	}
}
