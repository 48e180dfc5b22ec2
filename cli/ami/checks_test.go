package ami

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/definition"
)

func TestValidateCheckIsClusterValidate(t *testing.T) {
	l, err := definition.Load("../../clusters/staging-us-west-2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// An empty cluster: `cluster validate` fails it (no nodes, no addons), and so does the gate.
	err = bootstrap.ValidateCheck(fake.NewClientset(), l.ClusterDefinition)(context.Background(), &corev1.Node{})
	if err == nil || !strings.Contains(err.Error(), "cluster validation: ") {
		t.Fatalf("gate on an empty cluster: %v, want the validation's failure", err)
	}
}
