package controlplane

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/rest"
)

// APIServerProfile writes kube-apiserver's CPU profile over d to path (its
// /debug/pprof, on by default): the benchmarks use it to show where the
// apiserver's CPU goes.
func (cp *ControlPlane) APIServerProfile(ctx context.Context, path string, d time.Duration) error {
	hc, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		return fmt.Errorf("apiserver profile: create an HTTP client: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", cp.APIURL, int(d.Seconds())), nil)
	if err != nil {
		return fmt.Errorf("apiserver profile: make the request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("apiserver profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("apiserver profile: %s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("apiserver profile: %w", err)
	}
	return os.WriteFile(path, b, 0o644)
}
