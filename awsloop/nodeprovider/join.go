package nodeprovider

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/local/kindcluster"
)

// controlPlane is the kind control-plane container of a cluster.
func controlPlane(kind string) string { return kind + "-control-plane" }

// joinToken makes a bootstrap token on the control plane (kind's own has a
// 24h lifetime, and a local cluster lives longer).
func joinToken(ctx context.Context, kind string) (string, error) {
	tok, err := docker(ctx, nil, "exec", controlPlane(kind), "kubeadm", "token", "create", "--ttl", "2h")
	if err != nil {
		return "", fmt.Errorf("failed to create a join token: %w", err)
	}
	return tok, nil
}

// joinConfig is kubeadm's JoinConfiguration for an instance's node.
func joinConfig(kind, token, ip string, inst Instance) ([]byte, error) {
	labels := kubeletLabels(inst)
	keys := slices.Sorted(maps.Keys(labels))
	pairs := make([]string, 0, len(keys))
	for _, k := range keys {
		pairs = append(pairs, k+"="+labels[k])
	}
	taints := make([]map[string]string, 0, len(inst.Taints))
	for _, t := range inst.Taints {
		taints = append(taints, map[string]string{"key": t.Key, "value": t.Value, "effect": string(t.Effect)})
	}
	return yaml.Marshal(map[string]any{
		"apiVersion": "kubeadm.k8s.io/v1beta4",
		"kind":       "JoinConfiguration",
		"discovery": map[string]any{"bootstrapToken": map[string]any{
			"apiServerEndpoint": controlPlane(kind) + ":6443", "token": token, "unsafeSkipCAVerification": true,
		}},
		"nodeRegistration": map[string]any{
			"name":      inst.ID,
			"criSocket": "unix:///run/containerd/containerd.sock",
			"kubeletExtraArgs": []map[string]string{
				{"name": "node-ip", "value": ip},
				{"name": "provider-id", "value": inst.ProviderID()},
				{"name": "node-labels", "value": strings.Join(pairs, ",")},
			},
			"taints": taints,
		},
		"skipPhases": []string{"preflight"},
	})
}

// waitContainerd waits until the node container's containerd answers.
func waitContainerd(ctx context.Context, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := docker(ctx, nil, "exec", name, "ctr", "--namespace=k8s.io", "version")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd in %s did not start within %s: %w", name, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// copyContainerdConfig gives the node the containerd configuration kind
// patched into its own nodes at creation (the cluster's
// containerdConfigPatches: host quirks such as restrict_oom_score_adj) and
// restarts containerd on it.
func copyContainerdConfig(ctx context.Context, kind, name string) error {
	const path = "/etc/containerd/config.toml"
	cfg, err := docker(ctx, nil, "exec", controlPlane(kind), "cat", path)
	if err != nil {
		return fmt.Errorf("read %s of %s: %w", path, controlPlane(kind), err)
	}
	if _, err := docker(ctx, strings.NewReader(cfg+"\n"), "exec", "-i", name, "sh", "-c", "cat > "+path); err != nil {
		return fmt.Errorf("write %s of %s: %w", path, name, err)
	}
	if _, err := docker(ctx, nil, "exec", name, "systemctl", "restart", "containerd"); err != nil {
		return err
	}
	return waitContainerd(ctx, name, time.Minute)
}

// copyImages loads into the new node the runtime images the control-plane
// node holds (what `trellis local up` loaded), from the host's Docker.
func copyImages(ctx context.Context, kind, name string) error {
	c := kindcluster.New(kind, "", slog.New(slog.DiscardHandler))
	images, err := c.LoadedImages(controlPlane(kind))
	if err != nil {
		return fmt.Errorf("the images of %s: %w", controlPlane(kind), err)
	}
	if err := c.LoadNode(ctx, name, images); err != nil {
		return fmt.Errorf("load images into %s: %w", name, err)
	}
	return nil
}
