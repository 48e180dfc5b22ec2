package kindcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindexec "sigs.k8s.io/kind/pkg/exec"
	kindlog "sigs.k8s.io/kind/pkg/log"
)

// Cluster is a kind cluster driven through kind's library.
type Cluster struct {
	Name string
	// Kubeconfig is where the cluster's kubeconfig is written.
	Kubeconfig string
	Log        *slog.Logger
	// Retain keeps the nodes of a failed create, to debug it.
	Retain   bool
	provider *cluster.Provider
}

// New returns the kind cluster called name (it need not exist).
func New(name, kubeconfig string, log *slog.Logger) *Cluster {
	return &Cluster{
		Name: name, Kubeconfig: kubeconfig, Log: log,
		provider: cluster.NewProvider(cluster.ProviderWithDocker(), cluster.ProviderWithLogger(kindLogger{log})),
	}
}

// Exists reports whether kind has the cluster.
func (c *Cluster) Exists() (bool, error) {
	list, err := c.provider.List()
	if err != nil {
		return false, fmt.Errorf("list kind clusters: %w", err)
	}
	return slices.Contains(list, c.Name), nil
}

// Create creates the cluster from cfg on the node image; it does not wait
// for nodes to be Ready (they are not until the CNI, netd, is installed).
func (c *Cluster) Create(cfg *v1alpha4.Cluster, image string) error {
	if err := os.MkdirAll(filepath.Dir(c.Kubeconfig), 0o700); err != nil {
		return fmt.Errorf("failed to create the kubeconfig directory of cluster %s: %w", c.Name, err)
	}
	err := c.provider.Create(c.Name,

		cluster.CreateWithV1Alpha4Config(cfg),
		cluster.CreateWithNodeImage(image),
		cluster.CreateWithKubeconfigPath(c.Kubeconfig),
		cluster.CreateWithDisplayUsage(false),
		cluster.CreateWithDisplaySalutation(false),
		cluster.CreateWithRetain(c.Retain),
	)
	if err != nil {
		if rerr := kindexec.RunErrorForError(err); rerr != nil {
			out := string(rerr.Output)
			if len(out) > 4000 {
				out = "…" + out[len(out)-4000:]
			}
			return fmt.Errorf("create kind cluster %s: %w\n%s", c.Name, err, out)
		}
		return fmt.Errorf("create kind cluster %s: %w", c.Name, err)
	}
	return nil
}

// Delete deletes the cluster and its kubeconfig entry.
func (c *Cluster) Delete() error {
	if err := c.provider.Delete(c.Name, c.Kubeconfig); err != nil {
		return fmt.Errorf("delete kind cluster %s: %w", c.Name, err)
	}
	return nil
}

// Nodes lists the cluster's node containers.
func (c *Cluster) Nodes() ([]nodes.Node, error) {
	return c.provider.ListNodes(c.Name)
}

// loadedFile records, in each node, the Docker image IDs loaded into it.
const loadedFile = "/kind/trellis-images.json"

// Load loads Docker images into every node's containerd (what `kind load
// docker-image` does), skipping a node that already has an image at the same
// Docker image ID. It returns the images that changed in some node (their
// running pods still run the old content).
func (c *Cluster) Load(ctx context.Context, images []string) ([]string, error) {
	ns, err := c.Nodes()
	if err != nil {
		return nil, err
	}
	if len(ns) == 0 {
		return nil, fmt.Errorf("kind cluster %s has no nodes", c.Name)
	}
	ids, err := imageIDs(ctx, images)
	if err != nil {
		return nil, err
	}
	// What each node lacks; one archive of all of it, imported into the
	// nodes in parallel (an image a node has already is imported again,
	// which costs little).
	have := make([]map[string]string, len(ns))
	var union []string
	for i, n := range ns {
		have[i] = loaded(n)
		for _, img := range images {
			if have[i][img] != ids[img] && !slices.Contains(union, img) {
				union = append(union, img)
			}
		}
	}
	if len(union) == 0 {
		c.Log.Info("images up to date in every node", "images", len(images))
		return nil, nil
	}
	start := time.Now()
	archive, cleanup, err := save(ctx, union)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = loadInto(n, archive, union, ids, have[i])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	changed := map[string]bool{}
	for i := range ns {
		for _, img := range union {
			if old := have[i][img]; old != "" && old != ids[img] {
				changed[img] = true
			}
		}
	}
	c.Log.Info("images loaded", "nodes", len(ns), "images", len(union), "took", time.Since(start).Round(time.Millisecond))
	out := make([]string, 0, len(changed))
	for img := range changed {
		out = append(out, img)
	}
	slices.Sort(out)
	return out, nil
}

// LoadedImages are the images recorded as loaded into the named node.
func (c *Cluster) LoadedImages(node string) ([]string, error) {
	n, err := c.node(node)
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(loaded(n))), nil
}

// LoadNode loads images into one node (one that joined after Load ran),
// as Load does, streaming them from the host's Docker without an archive
// on disk (a node joins mid-rollout, when disk is tightest).
func (c *Cluster) LoadNode(ctx context.Context, node string, images []string) error {
	n, err := c.node(node)
	if err != nil {
		return err
	}
	ids, err := imageIDs(ctx, images)
	if err != nil {
		return err
	}
	had := loaded(n)
	err = stream(ctx, images, func(r io.Reader) error { return importArchive(n, r) })
	if err != nil {
		return fmt.Errorf("load images into %s: %w", n.String(), err)
	}
	return record(n, images, ids, had)
}

func (c *Cluster) node(name string) (nodes.Node, error) {
	ns, err := c.Nodes()
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		if n.String() == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("kind cluster %s has no node %s", c.Name, name)
}

// loaded is what loadedFile in a node records (empty when it has none).
func loaded(n nodes.Node) map[string]string {
	var buf bytes.Buffer
	have := map[string]string{}
	if err := n.Command("cat", loadedFile).SetStdout(&buf).Run(); err == nil {
		_ = json.Unmarshal(buf.Bytes(), &have)
	}
	if have == nil {
		have = map[string]string{}
	}
	return have
}

// kindLogger routes kind's logs to slog: its status lines at Info, its
// verbose lines at Debug.
type kindLogger struct{ l *slog.Logger }

func (k kindLogger) Warn(message string)                      { k.l.Warn(message) }
func (k kindLogger) Warnf(format string, args ...any)         { k.l.Warn(fmt.Sprintf(format, args...)) }
func (k kindLogger) Error(message string)                     { k.l.Error(message) }
func (k kindLogger) Errorf(format string, args ...any)        { k.l.Error(fmt.Sprintf(format, args...)) }
func (k kindLogger) V(level kindlog.Level) kindlog.InfoLogger { return kindInfo{l: k.l, level: level} }

type kindInfo struct {
	l     *slog.Logger
	level kindlog.Level
}

func (k kindInfo) Info(message string) {
	if k.level == 0 {
		k.l.Info(message)
	} else {
		k.l.Debug(message)
	}
}
func (k kindInfo) Infof(format string, args ...any) { k.Info(fmt.Sprintf(format, args...)) }
func (k kindInfo) Enabled() bool                    { return true }

// WriteKubeconfig (re)writes the cluster's kubeconfig entry.
func (c *Cluster) WriteKubeconfig() error {
	return c.provider.ExportKubeConfig(c.Name, c.Kubeconfig, false)
}
