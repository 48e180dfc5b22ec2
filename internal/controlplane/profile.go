package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
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
	return writeProfile(ctx, hc, "apiserver", cp.APIURL, path, d)
}

// ControllerManagerProfile writes kube-controller-manager's CPU profile
// over d to path. Its /debug/pprof is on its secure port, behind the
// apiserver's authentication and authorization (the admin's token passes
// both); its serving certificate is self-signed, so that one is not
// verified: the connection is to loopback.
func (cp *ControlPlane) ControllerManagerProfile(ctx context.Context, path string, d time.Duration) error {
	if cp.cm == nil {
		return errors.New("controller-manager profile: kube-controller-manager is not running")
	}
	port := ""
	for _, a := range cp.cm.cmd.Args {
		if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
			port = v
		}
	}
	if port == "" {
		return errors.New("controller-manager profile: kube-controller-manager has no --secure-port")
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.TLSClientConfig = rest.TLSClientConfig{Insecure: true}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("controller-manager profile: create an HTTP client: %w", err)
	}
	return writeProfile(ctx, hc, "controller-manager", "https://127.0.0.1:"+port, path, d)
}

func writeProfile(ctx context.Context, hc *http.Client, who, base, path string, d time.Duration) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, int(d.Seconds())), nil)
	if err != nil {
		return fmt.Errorf("%s profile: make the request: %w", who, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s profile: %w", who, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s profile: %s: %s", who, resp.Status, strings.TrimSpace(string(body)))
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s profile: read it: %w", who, err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("%s profile: %w", who, err)
	}
	return nil
}
