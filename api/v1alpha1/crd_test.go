package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// TestIntegrationCRDs installs the generated CRDs into a real apiserver and
// checks that the schema and CEL rules refuse bad objects with a clear
// message, and that kubectl shows the printer columns.
func TestIntegrationCRDs(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	ctx := context.Background()
	crds, _ := filepath.Glob("../../config/crd/*.yaml")
	if len(crds) != 6 {
		t.Fatalf("want 6 CRDs, got %v", crds)
	}
	if out, err := cp.Kubectl(ctx, "apply", "--server-side", "-f", "../../config/crd/"); err != nil {
		t.Fatalf("apply CRDs: %v\n%s", err, out)
	}
	if out, err := cp.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"); err != nil {
		t.Fatalf("wait: %v\n%s", err, out)
	}
	apply := func(name, body string) (string, error) {
		f := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		var out string
		var err error
		// Discovery of freshly established CRDs can lag by a moment.
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			out, err = cp.Kubectl(ctx, "apply", "-f", f)
			return err == nil || !strings.Contains(out, "no matches for kind"), nil
		})
		return out, err
	}
	good := `apiVersion: workloads.trellis.dev/v1alpha1
kind: TrellisService
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  ports: [{name: http, port: 8080}]
  ingress: {host: web.example.com, port: http}
  template:
    containers:
    - name: web
      image: registry.example/web:1
`
	if out, err := apply("good", good); err != nil {
		t.Fatalf("valid TrellisService refused: %v\n%s", err, out)
	}
	out, err := cp.Kubectl(ctx, "get", "trellisservices", "-n", "default")
	if err != nil || !strings.Contains(out, "REPLICAS") || !strings.Contains(out, "READY") || !strings.Contains(out, "web") {
		t.Errorf("printer columns: %v\n%s", err, out)
	}
	if out, err := cp.Kubectl(ctx, "get", "tsvc", "web", "-o", "jsonpath={.spec.runtime.discovery}"); err != nil || out != "true" {
		t.Errorf("default runtime.discovery: %q %v", out, err)
	}

	for _, tc := range []struct{ name, body, want string }{
		{"bad-ingress-port", strings.Replace(good, "port: http}", "port: grpc}", 1), "ingress.port must name one of ports"},
		{"no-containers", strings.Replace(good, "    containers:\n    - name: web\n      image: registry.example/web:1\n", "    containers: []\n", 1), "spec.template.containers"},
		{"pytorch-without-master", `apiVersion: workloads.trellis.dev/v1alpha1
kind: TrellisTrainingJob
metadata: {name: train, namespace: default}
spec:
  framework: PyTorch
  replicaSpecs:
  - role: Worker
    replicas: 2
    template: {containers: [{name: t, image: t}]}
`, "PyTorch jobs need exactly one Master replica"},
	} {
		out, err := apply(tc.name, tc.body)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%s: want refusal mentioning %q, got %v\n%s", tc.name, tc.want, err, out)
		}
	}

	// Immutable fields.
	js := `apiVersion: workloads.trellis.dev/v1alpha1
kind: TrellisJobSet
metadata: {name: shards, namespace: default}
spec:
  shards: 4
  template: {containers: [{name: s, image: s}]}
`
	if out, err := apply("js", js); err != nil {
		t.Fatalf("jobset: %v\n%s", err, out)
	}
	if out, err := apply("js2", strings.Replace(js, "shards: 4", "shards: 5", 1)); err == nil || !strings.Contains(out, "shards is immutable") {
		t.Errorf("changing shards: want refusal, got %v\n%s", err, out)
	}
}
