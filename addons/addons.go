// Package addons is the addon bundle every cluster gets: embedded,
// versioned manifests (package manifests: the templates and their index)
// rendered from the cluster definition and applied in
// dependency order with server-side apply. The same renderer wires a kind
// cluster and a production cluster; only the definition's values differ.
package addons

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/config"
	"github.com/trellis-dev/trellis/config/manifests"
	"github.com/trellis-dev/trellis/internal/versions"
)

// Namespace is where the runtime runs.
const Namespace = "trellis-system"

// Addon is an entry of the bundle's index (config/manifests/index.yaml).
type Addon = manifests.Addon

// Rendered is one addon's objects, ready to apply.
type Rendered struct {
	Addon   Addon
	Objects []*unstructured.Unstructured
	// Hash of the rendered manifests: unchanged addons are not re-applied.
	Hash string
}

// Values are what templates see.
type Values struct {
	Cluster     string
	Registry    string
	Version     string
	TrustDomain string
	PodCIDR     string
	// NetworkMode is netd's: "aws" (pods take VPC addresses from their
	// node's ENIs) on AWS, "bridge" (a bridge over each node's pod CIDR)
	// elsewhere.
	NetworkMode        string
	ZooKeeper          string
	ZooKeeperRoot      string
	LogShipperArgs     []string
	LogFileDir         string
	IssuerReplicas     int
	ControllerReplicas int
	// QuotaSchedule and QuotaWatchArgs run the trellis-quota addon's
	// CronJob (`trellis quota watch`), from the definition's quota section.
	QuotaSchedule  string
	QuotaWatchArgs []string
	// ConsoleDataDir is, on kind, a folder of the control-plane node
	// where a CronJob records every namespace's usage (`trellis quota
	// sample`) and the gateway's console reads it for the capacity page,
	// beside the AMI rollout state store its rollouts page shows. Empty
	// elsewhere: a cloud's console reads Prometheus and the kops state
	// store.
	ConsoleDataDir string
	// TokenCPU makes the runtime's CPU requests a tenth of production's
	// (Values.CPU): set on kind, where the nodes share the host's CPUs.
	TokenCPU bool
	// KubeRepository, KubernetesVersion and EtcdTag name the Kubernetes
	// images of a control plane an addon runs (the fleet's): those the
	// cluster's nodes have (kind) or pull (AWS).
	KubeRepository    string
	KubernetesVersion string
	EtcdTag           string
	// Addon are the values of the addon being rendered, from its
	// Lifecycle (nil: it has none).
	Addon map[string]any
}

// Registry of the runtime images.
const Registry = "registry.trellis.dev/trellis"

// KindConsoleDataDir is Values.ConsoleDataDir on kind: the usage samples
// are usage.jsonl in it, and the rollout state store (file://) for the
// cluster of the definition's name is its folder state.
const KindConsoleDataDir = "/var/lib/trellis/console"

// Render renders the definition's addons, in dependency order (an addon's
// dependencies that the definition does not list are skipped: a cluster
// may bring its own, e.g. ZooKeeper outside the cluster). An addon's
// .Addon values come from the lifecycle that serves it, among those the
// caller passes (the bundle's: the builder of the bundle knows them).
func Render(def *definition.ClusterDefinition, lifecycles ...Lifecycle) ([]Rendered, error) {
	order, err := Order(def)
	if err != nil {
		return nil, err
	}
	v := Values{
		Cluster: def.Name, Registry: Registry, TrustDomain: def.Runtime.TrustDomain, PodCIDR: def.Network.PodCIDR,
		ZooKeeper: strings.Join(def.Runtime.ZooKeeper.Ensemble, ","), ZooKeeperRoot: def.Runtime.ZooKeeper.Root,
		IssuerReplicas: 2, ControllerReplicas: 2, NetworkMode: "bridge",
		KubeRepository: render.ImageRepository(def), KubernetesVersion: "v" + strings.TrimPrefix(def.KubernetesVersion, "v"),
		EtcdTag: render.EtcdImageTag(versions.Etcd),
	}
	if def.Cloud == definition.CloudAWS {
		v.NetworkMode = "aws"
	}
	if v.ZooKeeperRoot == "" {
		v.ZooKeeperRoot = "/discovery"
	}
	if def.Cloud == definition.CloudKind {
		v.IssuerReplicas, v.ControllerReplicas = 1, 1
		v.ConsoleDataDir = KindConsoleDataDir
		v.TokenCPU = true
	}
	sink := def.Runtime.LogSink
	switch sink.Type {
	case "", "kafka":
		v.LogShipperArgs = []string{"--sink=kafka", "--brokers=" + strings.Join(sink.Brokers, ",")}
		if sink.Topic != "" {
			v.LogShipperArgs = append(v.LogShipperArgs, "--topic="+sink.Topic)
		}
	case "file":
		v.LogShipperArgs = []string{"--sink=file", "--file=" + sink.Path}
		v.LogFileDir = path.Dir(sink.Path)
	default:
		v.LogShipperArgs = []string{"--sink=" + sink.Type}
	}
	v.QuotaSchedule, v.QuotaWatchArgs = quotaWatch(def.Quota)
	var out []Rendered
	for _, a := range order {
		v.Version, v.Addon = a.Version, valuesFor(lifecycles, def, a.Name)
		objs, raw, err := renderAddon(a, v)
		if err != nil {
			return nil, fmt.Errorf("addon %s %s: %w", a.Name, a.Version, err)
		}
		sum := sha256.Sum256(raw)
		out = append(out, Rendered{Addon: a, Objects: objs, Hash: fmt.Sprintf("%x", sum[:8])})
	}
	return out, nil
}

// Order returns the definition's addons from the index, dependencies
// first (ties by name, so the order is stable).
func Order(def *definition.ClusterDefinition) ([]Addon, error) {
	return order(manifests.Index, def)
}

func order(index []Addon, def *definition.ClusterDefinition) ([]Addon, error) {
	want := map[string]Addon{}
	for _, a := range def.Addons {
		i := slices.IndexFunc(index, func(x Addon) bool { return x.Name == a.Name })
		if i < 0 {
			return nil, fmt.Errorf("unknown addon %q", a.Name)
		}
		if a.Version != "" && a.Version != index[i].Version {
			return nil, fmt.Errorf("addon %s: version %s is not in the bundle (it has %s)", a.Name, a.Version, index[i].Version)
		}
		want[a.Name] = index[i]
	}
	var order []Addon
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, chain []string) error
	visit = func(name string, chain []string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("addon dependency cycle: %s", strings.Join(append(chain, name), " -> "))
		case 2:
			return nil
		}
		a, ok := want[name]
		if !ok {
			return nil
		}
		state[name] = 1
		deps := slices.Clone(a.DependsOn)
		sort.Strings(deps)
		for _, d := range deps {
			if err := visit(d, append(chain, name)); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, a)
		return nil
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := visit(n, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func renderAddon(a Addon, v Values) ([]*unstructured.Unstructured, []byte, error) {
	var raw bytes.Buffer
	if a.CRDs {
		entries, err := fs.ReadDir(config.CRDs, "crd")
		if err != nil {
			return nil, nil, fmt.Errorf("failed to list the embedded CRDs of addon %s: %w", a.Name, err)
		}
		for _, e := range entries {
			b, err := fs.ReadFile(config.CRDs, "crd/"+e.Name())
			if err != nil {
				return nil, nil, fmt.Errorf("failed to read the embedded CRD %s of addon %s: %w", e.Name(), a.Name, err)
			}
			raw.WriteString("---\n")
			raw.Write(b)
		}
	}
	entries, err := fs.ReadDir(manifests.FS, a.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to list the templates of addon %s: %w", a.Name, err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(manifests.FS, a.Name+"/"+e.Name())
		if err != nil {
			return nil, nil, fmt.Errorf("failed to read template %s/%s: %w", a.Name, e.Name(), err)
		}
		t, err := template.New(e.Name()).Option("missingkey=error").Parse(string(b))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		raw.WriteString("---\n")
		if err := t.Execute(&raw, v); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw.Bytes()), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if err.Error() == "EOF" {
				break
			}
			return nil, nil, fmt.Errorf("rendered manifests do not parse: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["addons.trellis.dev/name"] = a.Name
		labels["addons.trellis.dev/version"] = a.Version
		u.SetLabels(labels)
		objs = append(objs, u)
	}
	return objs, raw.Bytes(), nil
}

// quotaWatch is the quota watch's schedule and arguments, defaults filled.
func quotaWatch(q definition.Quota) (string, []string) {
	schedule := q.Schedule
	if schedule == "" {
		schedule = "0 * * * *"
	}
	th := q.Threshold
	if th == 0 {
		th = 0.8
	}
	tz := q.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	args := []string{"quota", "watch", "--threshold=" + strconv.FormatFloat(th, 'f', -1, 64), "--tz=" + tz}
	if q.Webhook != "" {
		args = append(args, "--webhook="+q.Webhook)
	}
	if q.Prometheus != "" {
		lead := q.Lead
		if lead == "" {
			lead = "336h"
		}
		args = append(args, "--forecast", "--prometheus="+q.Prometheus, "--lead="+lead)
	}
	return schedule, args
}
