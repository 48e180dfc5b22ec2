package nodeprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// docker runs a docker command and returns its trimmed stdout.
func docker(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args[:min(len(args), 3)], " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// container is a node container of an instance.
type container struct{ Name, Instance, State string }

// containers lists the instance node containers of a kind cluster.
func containers(ctx context.Context, kind string) (map[string]container, error) {
	out, err := docker(ctx, nil, "ps", "-a", "--filter", "label=io.x-k8s.kind.cluster="+kind, "--filter", "label="+LabelInstance,
		"--format", `{{.Names}}	{{.Label "`+LabelInstance+`"}}	{{.State}}`)
	if err != nil {
		return nil, err
	}
	res := map[string]container{}
	for line := range strings.Lines(out) {
		f := strings.Split(strings.TrimSpace(line), "\t")
		if len(f) == 3 {
			res[f[1]] = container{Name: f[0], Instance: f[1], State: f[2]}
		}
	}
	return res, nil
}

// shape is what a node container shares with the kind cluster's own
// workers: kind's docker run flags plus the host's extra mounts.
type shape struct {
	Binds []string
	Env   []string
}

// workerShape copies the mounts and environment of one of kind's own nodes,
// so an instance node gets whatever the host's quirks required of them.
func workerShape(ctx context.Context, kind string) (shape, error) {
	name, err := docker(ctx, nil, "ps", "--filter", "label=io.x-k8s.kind.cluster="+kind, "--filter", "label=io.x-k8s.kind.role=control-plane", "--format", "{{.Names}}")
	if err != nil {
		return shape{}, err
	}
	if name == "" {
		return shape{}, fmt.Errorf("kind cluster %s has no running control-plane node: run `trellis local up` first", kind)
	}
	raw, err := docker(ctx, nil, "inspect", "--format", "{{json .HostConfig.Binds}}\t{{json .Config.Env}}", strings.Fields(name)[0])
	if err != nil {
		return shape{}, err
	}
	binds, env, _ := strings.Cut(raw, "\t")
	var s shape
	if err := json.Unmarshal([]byte(binds), &s.Binds); err != nil {
		return shape{}, fmt.Errorf("inspect %s: %w", name, err)
	}
	if err := json.Unmarshal([]byte(env), &s.Env); err != nil {
		return shape{}, fmt.Errorf("inspect %s: %w", name, err)
	}
	return s, nil
}

// runArgs are kind's docker run flags for a worker (kind's
// pkg/cluster/internal/providers/docker/provision.go), with the instance's
// labels.
func runArgs(kind, name string, inst Instance, image string, s shape) []string {
	args := []string{"run", "-d", "--name", name, "--hostname", inst.ID,
		"--label", "io.x-k8s.kind.cluster=" + kind, "--label", "io.x-k8s.kind.role=worker",
		"--label", LabelInstance + "=" + inst.ID, "--label", "trellis.dev/instance-group=" + inst.Group,
		"--privileged", "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined", "--security-opt", "label=disable",
		"--tmpfs", "/tmp", "--tmpfs", "/run", "--volume", "/var",
		"--restart=on-failure:1", "--init=false", "--cgroupns=private", "--net", "kind"}
	for _, b := range s.Binds {
		args = append(args, "--volume", b)
	}
	for _, e := range s.Env {
		if !strings.HasPrefix(e, "PATH=") {
			args = append(args, "-e", e)
		}
	}
	return append(args, image)
}
