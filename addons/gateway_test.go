package addons

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// gatewayDeployment renders name with the state store and returns the
// gateway container's arguments and whether the pod is on the host network.
func gatewayDeployment(t *testing.T, name, stateStore string) (args []string, hostNetwork bool) {
	t.Helper()
	rendered, err := RenderWith(load(t, name), RenderOptions{StateStore: stateStore})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rendered {
		for _, o := range r.Objects {
			if o.GetKind() != "Deployment" || o.GetName() != "trellis-gateway" {
				continue
			}
			hostNetwork, _, _ = unstructured.NestedBool(o.Object, "spec", "template", "spec", "hostNetwork")
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				c := c.(map[string]any)
				if c["name"] == "gateway" {
					a, _, _ := unstructured.NestedStringSlice(c, "args")
					return a, hostNetwork
				}
			}
		}
	}
	t.Fatalf("%s renders no trellis-gateway Deployment with a gateway container", name)
	return nil, false
}

// TestRenderRolloutStateStore: an AWS cluster's gateway reads the AMI
// rollout from the state store it was applied with (the kops cluster
// name), with its node's instance role (host network); a kind cluster's
// has no state store, whatever apply is given, and keeps its pod network.
func TestRenderRolloutStateStore(t *testing.T) {
	rollout := func(args []string) []string {
		var out []string
		for _, a := range args {
			if strings.HasPrefix(a, "--rollout-") {
				out = append(out, a)
			}
		}
		return out
	}
	for _, tc := range []struct {
		cluster, store string
		want           []string
		hostNetwork    bool
	}{
		{"prod-us-east-1", "s3://trellis-state/clusters", []string{"--rollout-state-store=s3://trellis-state/clusters", "--rollout-cluster=prod-us-east-1.k8s.trellis.example"}, true},
		{"staging-us-west-2", "s3://other/state", []string{"--rollout-state-store=s3://other/state", "--rollout-cluster=staging-us-west-2.k8s.trellis.example"}, true},
		{"prod-us-east-1", "", nil, false},
		{"local", "s3://trellis-state/clusters", nil, false},
		{"local", "file:///tmp/state", nil, false},
	} {
		args, hostNetwork := gatewayDeployment(t, tc.cluster, tc.store)
		if got := rollout(args); !slices.Equal(got, tc.want) {
			t.Errorf("%s with state store %q: rollout flags %q, want %q", tc.cluster, tc.store, got, tc.want)
		}
		if hostNetwork != tc.hostNetwork {
			t.Errorf("%s with state store %q: hostNetwork %v, want %v", tc.cluster, tc.store, hostNetwork, tc.hostNetwork)
		}
	}
}
