package karmada

import (
	"context"
	"net"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestIntegrationPortTakenMeanwhile: the first port offered to Karmada's
// components (the webhook's) is bound by the test, as another package's
// process may bind a port between its choice and the component's bind.
// The real karmada-webhook fails to bind and starts again on other ports,
// and the control plane serves.
func TestIntegrationPortTakenMeanwhile(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldPort := held.Addr().(*net.TCPAddr).Port
	calls := 0
	orig := freePorts
	freePorts = func(n int) ([]int, error) {
		calls++
		ports, err := orig(n)
		if calls == 1 && err == nil {
			ports[0] = heldPort
		}
		return ports, err
	}
	defer func() { freePorts = orig }()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := Start(ctx, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	if cp.ports["webhook"] == heldPort {
		t.Fatalf("the webhook is said to serve on the port the test holds (%d)", heldPort)
	}
	if !cp.logSays(Webhook, "address already in use") {
		t.Fatal("the webhook's first start did not meet the held port: the test proves nothing")
	}
	if _, err := cp.Dynamic.Resource(ClusterGVR).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("clusters: %v", err)
	}
}
