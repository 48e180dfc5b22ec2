package kindcluster

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/pelletier/go-toml"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
)

// ctrImport imports a docker-save archive into a node's containerd under
// the archive's own tags. It is kind's nodeutils.LoadImageArchive without
// --digests: that flag also names each image import-<date>@<digest>, and
// the CRI's image cache keeps that name after ctr removes it (until
// containerd restarts). The kubelet then reports a pod's image as
// docker.io/library/import-<date>@sha256:…, a registry the gateway's
// provenance check refuses, instead of the image's own repository.
func ctrImport(n nodes.Node, archive io.Reader) error {
	var out bytes.Buffer
	if err := n.Command("containerd", "config", "dump").SetStdout(&out).Run(); err != nil {
		return fmt.Errorf("read %s's containerd config: %w", n.String(), err)
	}
	snap, err := snapshotter(out.String())
	if err != nil {
		return fmt.Errorf("%s: %w", n.String(), err)
	}
	var stderr bytes.Buffer
	cmd := n.Command("ctr", "--namespace=k8s.io", "images", "import", "--all-platforms", "--snapshotter="+snap, "-")
	if err := cmd.SetStdin(archive).SetStderr(&stderr).Run(); err != nil {
		return fmt.Errorf("ctr images import into %s: %w: %s", n.String(), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// snapshotter is the CRI's snapshotter in a `containerd config dump`.
func snapshotter(config string) (string, error) {
	tree, err := toml.Load(config)
	if err != nil {
		return "", fmt.Errorf("parse the containerd config: %w", err)
	}
	version, _ := tree.Get("version").(int64)
	var path []string
	switch version {
	case 2:
		path = []string{"plugins", "io.containerd.grpc.v1.cri", "containerd", "snapshotter"}
	case 3, 4:
		path = []string{"plugins", "io.containerd.cri.v1.images", "snapshotter"}
	default:
		return "", fmt.Errorf("containerd config version %d: want 2, 3 or 4", version)
	}
	s, ok := tree.GetPath(path).(string)
	if !ok || s == "" {
		return "", fmt.Errorf("containerd config version %d has no %s", version, strings.Join(path, "."))
	}
	return s, nil
}
