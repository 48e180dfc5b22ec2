package cluster

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIntegrationControlPlane(t *testing.T) {
	cp := Start(t, Options{})
	ctx := context.Background()
	v, err := cp.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != KubernetesVersion {
		t.Errorf("server version %s, want %s", v.GitVersion, KubernetesVersion)
	}
	if _, err := cp.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := cp.Kubectl(ctx, "get", "ns", "default", "-o", "name")
	if err != nil || strings.TrimSpace(out) != "namespace/default" {
		t.Fatalf("kubectl: %q %v", out, err)
	}
	// The apiserver comes back after a restart.
	cp.StopAPIServer()
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}
