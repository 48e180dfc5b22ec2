package kindcluster

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// StartStopped starts the cluster's node containers that are not running
// (a host or Docker restart can leave them stopped). The control plane is
// started first, as kind creates it.
func (c *Cluster) StartStopped(ctx context.Context) error {
	ns, err := c.Nodes()
	if err != nil {
		return fmt.Errorf("list the nodes of %s: %w", c.Name, err)
	}
	var stopped []string
	for _, n := range ns {
		out, err := exec.CommandContext(ctx, "docker", "inspect", "--format", "{{.State.Running}}", n.String()).CombinedOutput()
		if err != nil {
			return fmt.Errorf("inspect node %s: %w: %s", n, err, out)
		}
		if strings.TrimSpace(string(out)) == "true" {
			continue
		}
		role, err := n.Role()
		if err != nil {
			return fmt.Errorf("role of node %s: %w", n, err)
		}
		if role == "control-plane" {
			stopped = append([]string{n.String()}, stopped...)
		} else {
			stopped = append(stopped, n.String())
		}
	}
	for _, name := range stopped {
		c.Log.Info("starting a stopped node", "node", name)
		if err := docker(ctx, "start", name); err != nil {
			return err
		}
	}
	return nil
}
