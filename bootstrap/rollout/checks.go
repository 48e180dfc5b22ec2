package rollout

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Check is a custom gate a new node must pass (Options.Checks).
type Check = func(ctx context.Context, node *corev1.Node) error

// nodeIP is the node's InternalIP ("" if it has none).
func nodeIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// HTTPCheck passes when a GET of url answers 2xx within timeout; {node} and
// {ip} in url become the node's name and InternalIP.
func HTTPCheck(url string, timeout time.Duration) Check {
	return func(ctx context.Context, n *corev1.Node) error {
		u := strings.NewReplacer("{node}", n.Name, "{ip}", nodeIP(n)).Replace(url)
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return fmt.Errorf("check %s: %w", u, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("check %s: %w", u, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("check %s: %s %s", u, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	}
}

// CommandCheck passes when `sh -c command` exits 0 within timeout, run with
// TRELLIS_NODE, TRELLIS_NODE_IP and TRELLIS_PROVIDER_ID set.
func CommandCheck(command string, timeout time.Duration) Check {
	return func(ctx context.Context, n *corev1.Node) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		cmd.Env = append(os.Environ(), "TRELLIS_NODE="+n.Name, "TRELLIS_NODE_IP="+nodeIP(n), "TRELLIS_PROVIDER_ID="+n.Spec.ProviderID)
		// On timeout the whole process group goes, not only the shell.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Second
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("check %q on %s: %w: %s", command, n.Name, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
}
