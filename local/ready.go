package local

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// apiServerReadyTimeout bounds the wait for a reused cluster's apiserver.
const apiServerReadyTimeout = 3 * time.Minute

// waitAPIServerReady polls /readyz until the apiserver says it is ready.
// A reused cluster's apiserver may have just (re)started with its nodes:
// until its informers have synced, the RBAC authorizer has no bindings
// and refuses even the cluster admin ("nodes is forbidden"), which
// /readyz's informer-sync check covers.
func waitAPIServerReady(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			last = fmt.Errorf("%w: %s", err, body)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if last == nil {
			last = err
		}
		return fmt.Errorf("the apiserver is not ready after %s (trellis local up --recreate replaces the cluster): %w", timeout, last)
	}
	return nil
}
