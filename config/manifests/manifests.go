// Package manifests is the addon bundle as data: a directory of manifest
// templates per addon and index.yaml, the catalogue of the addons with
// their versions, dependencies and supported Kubernetes minors. The
// renderer (package addons) and cluster-definition validation
// (bootstrap/definition) both read this one index.
package manifests

import (
	"embed"
	"fmt"
	"slices"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/internal/versions"
)

// FS holds index.yaml and each addon's templates under <name>/.
//
//go:embed index.yaml */*.yaml
var FS embed.FS

// Addon is an entry of the index.
type Addon struct {
	Name    string
	Version string
	// DependsOn are applied (and ready) first.
	DependsOn []string
	// MinKubernetes and MaxKubernetes bound the Kubernetes versions
	// supported: the first patch of the oldest minor, the last of the
	// newest.
	MinKubernetes, MaxKubernetes semver.Version
	// CRDs: the addon ships the workload CRDs.
	CRDs bool
	// FlowSchemas an addon that runs no workload configures: cluster
	// validation checks them instead of a workload named after the addon.
	FlowSchemas []string
	// Workloads are the addon's workloads cluster validation checks, when
	// none is named after the addon (default: the addon's name).
	Workloads []string
}

// Index is the bundle, in index.yaml's order.
var Index = mustIndex()

// Lookup returns the index entry of the addon called name.
func Lookup(name string) (Addon, bool) {
	i := slices.IndexFunc(Index, func(a Addon) bool { return a.Name == name })
	if i < 0 {
		return Addon{}, false
	}
	return Index[i], true
}

// indexFile is index.yaml as written.
type indexFile struct {
	Addons []entry `json:"addons"`
}

type entry struct {
	Name          string   `json:"name"`
	Version       string   `json:"version"`
	DependsOn     []string `json:"dependsOn,omitempty"`
	MinKubernetes string   `json:"minKubernetes"`
	MaxKubernetes string   `json:"maxKubernetes"`
	CRDs          bool     `json:"crds,omitempty"`
	FlowSchemas   []string `json:"flowSchemas,omitempty"`
	Workloads     []string `json:"workloads,omitempty"`
}

// ParseIndex decodes an index strictly (an unknown or repeated field is an
// error) and checks each entry: a name, a semantic version, a Kubernetes
// range, no name twice, dependencies that are in the index.
func ParseIndex(b []byte) ([]Addon, error) {
	var f indexFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("failed to decode the addon index: %w", err)
	}
	if len(f.Addons) == 0 {
		return nil, fmt.Errorf("no addons")
	}
	var out []Addon
	seen := map[string]bool{}
	for i, e := range f.Addons {
		if e.Name == "" {
			return nil, fmt.Errorf("addons[%d]: no name", i)
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("addon %s is listed twice", e.Name)
		}
		seen[e.Name] = true
		if _, err := semver.Parse(e.Version); err != nil {
			return nil, fmt.Errorf("addon %s: version %q: %w", e.Name, e.Version, err)
		}
		lo, hi, err := versions.Minors(e.MinKubernetes, e.MaxKubernetes)
		if err != nil {
			return nil, fmt.Errorf("addon %s: minKubernetes, maxKubernetes: %w", e.Name, err)
		}
		out = append(out, Addon{Name: e.Name, Version: e.Version, DependsOn: e.DependsOn,
			MinKubernetes: lo, MaxKubernetes: hi, CRDs: e.CRDs, FlowSchemas: e.FlowSchemas, Workloads: e.Workloads})
	}
	for _, a := range out {
		for _, d := range a.DependsOn {
			if !seen[d] {
				return nil, fmt.Errorf("addon %s depends on %s, which is not in the index", a.Name, d)
			}
		}
	}
	return out, nil
}

func mustIndex() []Addon {
	b, err := FS.ReadFile("index.yaml")
	if err != nil {
		panic(err)
	}
	index, err := ParseIndex(b)
	if err != nil {
		panic(fmt.Sprintf("config/manifests/index.yaml: %v", err))
	}
	return index
}
