package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/trellis-dev/trellis/api/v1alpha1"
)

// A Placement says where a namespace's Trellis workloads run in the fleet:
// Trellis's small placement language, rendered into one Karmada
// PropagationPolicy per placement.
//
//	apiVersion: fleet.trellis.dev/v1alpha1
//	kind: Placement
//	metadata: {name: web, namespace: shop}
//	spec:
//	  workloads: [{kind: TrellisService, name: web}]   # default: every Trellis workload of the namespace
//	  clusters: [prod-us-east-1, prod-us-west-2]       # default: every member
//	  spread: weighted                                 # capacity (default), weighted or duplicated
//	  weights: {prod-us-east-1: 2, prod-us-west-2: 1}
//	  minClusters: 2
//	  failoverAfter: 30s
type Placement struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   PlacementMetadata `yaml:"metadata"`
	Spec       PlacementSpec     `yaml:"spec"`

	file string
	line int
	node *yaml.Node
}

// PlacementMetadata names a placement; its namespace is the workloads'.
type PlacementMetadata struct {
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
}

// PlacementSpec is where the workloads go and how replicas divide.
type PlacementSpec struct {
	// Workloads select what is placed; none selects every Trellis kind in
	// the namespace.
	Workloads []WorkloadSelector `yaml:"workloads"`
	// Clusters are the candidate members by name; ClusterLabels select
	// them by label. Neither: every member.
	Clusters      []string          `yaml:"clusters"`
	ClusterLabels map[string]string `yaml:"clusterLabels"`
	// Spread divides replicas: capacity (in proportion to what each member
	// can still fit, from Karmada's resource summary), weighted (Weights)
	// or duplicated (every member runs all replicas). Kinds without
	// replicas run whole in every selected member.
	Spread  Spread           `yaml:"spread"`
	Weights map[string]int64 `yaml:"weights"`
	// MinClusters and MaxClusters bound how many members a capacity-spread
	// workload runs in (MaxClusters default: spec.clusters' count, or
	// unbounded).
	MinClusters int `yaml:"minClusters"`
	MaxClusters int `yaml:"maxClusters"`
	// FailoverAfter is how long a member may be not Ready before its
	// replicas move to the others (default 30s). Never: they stay.
	FailoverAfter string `yaml:"failoverAfter"`
}

// WorkloadSelector picks workloads by kind, and name or labels.
type WorkloadSelector struct {
	Kind   string            `yaml:"kind"`
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

// Spread is how a placement divides replicas.
type Spread string

// Spreads.
const (
	SpreadCapacity   Spread = "capacity"
	SpreadWeighted   Spread = "weighted"
	SpreadDuplicated Spread = "duplicated"
)

// Placement identity.
const (
	PlacementAPIVersion = "fleet.trellis.dev/v1alpha1"
	PlacementKind       = "Placement"
	// NotReadyTaint is the NoExecute taint the fleet's ClusterTaintPolicy
	// puts on a member that is not Ready; placements tolerate it for
	// FailoverAfter.
	NotReadyTaint = "fleet.trellis.dev/not-ready"
	// DefaultFailoverAfter is FailoverAfter's default.
	DefaultFailoverAfter = 30 * time.Second
)

// unboundedClusters stands for "every member" in a spread constraint.
const unboundedClusters = 1000

// LoadPlacements reads a file of one or more placements, strictly: an
// unknown field or a bad value is an error naming the file and line.
func LoadPlacements(path string) ([]*Placement, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the placement file: %w", err)
	}
	return DecodePlacements(path, data)
}

// DecodePlacements is LoadPlacements of data read from file.
func DecodePlacements(file string, data []byte) ([]*Placement, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []*Placement
	seen := map[string]string{}
	var errs []error
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(n.Content) == 0 {
			continue
		}
		// A document node sits on its "---"; its mapping on the first line.
		p := &Placement{file: file, line: n.Content[0].Line, node: n.Content[0]}
		if err := strictDecode(&n, p); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if err := p.validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		key := p.Metadata.Namespace + "/" + p.Metadata.Name
		if prev, ok := seen[key]; ok {
			errs = append(errs, fmt.Errorf("%s:%d: placement %s is already defined at line %s", file, p.line, key, prev))
			continue
		}
		seen[key] = fmt.Sprint(p.line)
		out = append(out, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no placements", file)
	}
	return out, nil
}

// strictDecode decodes a document node, refusing unknown fields.
func strictDecode(n *yaml.Node, into any) error {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	if err := enc.Encode(n); err != nil {
		return fmt.Errorf("re-encode the placement: %w", err)
	}
	d := yaml.NewDecoder(&b)
	d.KnownFields(true)
	if err := d.Decode(into); err != nil {
		// Lines are the document's own: shift them to the file's.
		return shiftLines(err, n.Content[0].Line-1)
	}
	return nil
}

func shiftLines(err error, by int) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) || by == 0 {
		return err
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		var line int
		var rest string
		if _, scanErr := fmt.Sscanf(m, "line %d:", &line); scanErr == nil {
			rest = m[strings.Index(m, ":")+1:]
			m = fmt.Sprintf("line %d:%s", line+by, rest)
		}
		msgs[i] = m
	}
	return errors.New(strings.Join(msgs, "; "))
}

func (p *Placement) errorf(field, format string, args ...any) error {
	return fmt.Errorf("%s:%d: placement %s/%s: %s: %s", p.file, p.fieldLine(field), p.Metadata.Namespace, p.Metadata.Name, field, fmt.Sprintf(format, args...))
}

// fieldLine is the line of a field path such as spec.workloads[0].kind:
// of the deepest part of it the document has (the document's first line
// when the field is missing altogether).
func (p *Placement) fieldLine(path string) int {
	n, line := p.node, p.line
	for _, part := range strings.Split(path, ".") {
		key, index := part, -1
		if i := strings.IndexByte(part, '['); i >= 0 {
			key = part[:i]
			_, _ = fmt.Sscanf(part[i:], "[%d]", &index)
		}
		next := mappingValue(n, key)
		if next == nil {
			return line
		}
		n, line = next, next.Line
		if index >= 0 {
			if n.Kind != yaml.SequenceNode || index >= len(n.Content) {
				return line
			}
			n, line = n.Content[index], n.Content[index].Line
		}
	}
	return line
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

var trellisKinds = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range Kinds() {
		m[k] = true
	}
	return m
}()

func (p *Placement) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) { errs = append(errs, p.errorf(field, format, args...)) }
	if p.APIVersion != PlacementAPIVersion || p.Kind != PlacementKind {
		bad("apiVersion/kind", "want %s %s, got %q %q", PlacementAPIVersion, PlacementKind, p.APIVersion, p.Kind)
	}
	if e := validation.IsDNS1123Subdomain(p.Metadata.Name); len(e) > 0 {
		bad("metadata.name", "%q: %s", p.Metadata.Name, strings.Join(e, "; "))
	}
	if e := validation.IsDNS1123Label(p.Metadata.Namespace); len(e) > 0 {
		bad("metadata.namespace", "%q: %s", p.Metadata.Namespace, strings.Join(e, "; "))
	}
	for i, w := range p.Spec.Workloads {
		f := fmt.Sprintf("spec.workloads[%d]", i)
		if !trellisKinds[w.Kind] {
			bad(f+".kind", "%q is not a Trellis workload kind (%s)", w.Kind, strings.Join(Kinds(), ", "))
		}
		if w.Name != "" && len(w.Labels) > 0 {
			bad(f, "name and labels both set: choose one")
		}
	}
	clusters := map[string]bool{}
	for i, c := range p.Spec.Clusters {
		if e := validation.IsDNS1123Label(c); len(e) > 0 {
			bad(fmt.Sprintf("spec.clusters[%d]", i), "%q is not a member name", c)
		}
		if clusters[c] {
			bad(fmt.Sprintf("spec.clusters[%d]", i), "%s listed twice", c)
		}
		clusters[c] = true
	}
	if p.Spec.Spread == "" {
		p.Spec.Spread = SpreadCapacity
	}
	switch p.Spec.Spread {
	case SpreadWeighted:
		if len(p.Spec.Weights) == 0 {
			bad("spec.weights", "spread weighted needs a weight per cluster")
		}
		for _, c := range sortedKeys(p.Spec.Weights) {
			if w := p.Spec.Weights[c]; w < 1 {
				bad("spec.weights."+c, "weight %d: weights are positive", w)
			}
			if len(clusters) > 0 && !clusters[c] {
				bad("spec.weights."+c, "%s is not among spec.clusters", c)
			}
		}
		if p.Spec.MinClusters > 0 || p.Spec.MaxClusters > 0 {
			bad("spec.minClusters", "min/maxClusters apply to spread capacity only (weights already name the clusters)")
		}
	case SpreadCapacity, SpreadDuplicated:
		if len(p.Spec.Weights) > 0 {
			bad("spec.weights", "set with spread %s: weights apply to spread weighted only", p.Spec.Spread)
		}
	default:
		bad("spec.spread", "%q: use capacity, weighted or duplicated", p.Spec.Spread)
	}
	if p.Spec.MinClusters < 0 || (len(clusters) > 0 && p.Spec.MinClusters > len(clusters)) {
		bad("spec.minClusters", "%d: between 0 and the number of spec.clusters", p.Spec.MinClusters)
	}
	if p.Spec.MaxClusters < 0 || (p.Spec.MaxClusters > 0 && p.Spec.MaxClusters < p.Spec.MinClusters) {
		bad("spec.maxClusters", "%d: at least minClusters (%d)", p.Spec.MaxClusters, p.Spec.MinClusters)
	}
	if _, err := p.failoverAfter(); err != nil {
		bad("spec.failoverAfter", "%v", err)
	}
	return errors.Join(errs...)
}

// failoverAfter is the toleration of a not-Ready member; negative: never.
func (p *Placement) failoverAfter() (time.Duration, error) {
	switch p.Spec.FailoverAfter {
	case "":
		return DefaultFailoverAfter, nil
	case "Never", "never":
		return -1, nil
	}
	d, err := time.ParseDuration(p.Spec.FailoverAfter)
	if err != nil || d < 0 || d != d.Truncate(time.Second) {
		return 0, fmt.Errorf("%q: a whole number of seconds such as 30s or 2m, or Never", p.Spec.FailoverAfter)
	}
	return d, nil
}

// PropagationPolicy renders the placement as Karmada's policy.
func (p *Placement) PropagationPolicy() *unstructured.Unstructured {
	var selectors []any
	if len(p.Spec.Workloads) == 0 {
		for _, k := range Kinds() {
			selectors = append(selectors, map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": k})
		}
	}
	for _, w := range p.Spec.Workloads {
		s := map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": w.Kind}
		if w.Name != "" {
			s["name"] = w.Name
		}
		if len(w.Labels) > 0 {
			s["labelSelector"] = map[string]any{"matchLabels": stringMap(w.Labels)}
		}
		selectors = append(selectors, s)
	}
	affinity := map[string]any{}
	if len(p.Spec.Clusters) > 0 {
		affinity["clusterNames"] = stringSlice(p.Spec.Clusters)
	}
	if len(p.Spec.ClusterLabels) > 0 {
		affinity["labelSelector"] = map[string]any{"matchLabels": stringMap(p.Spec.ClusterLabels)}
	}
	placement := map[string]any{"clusterAffinity": affinity}
	switch p.Spec.Spread {
	case SpreadDuplicated:
		placement["replicaScheduling"] = map[string]any{"replicaSchedulingType": "Duplicated"}
	case SpreadWeighted:
		var list []any
		for _, c := range sortedKeys(p.Spec.Weights) {
			list = append(list, map[string]any{"targetCluster": map[string]any{"clusterNames": []any{c}}, "weight": p.Spec.Weights[c]})
		}
		placement["replicaScheduling"] = map[string]any{"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
			"weightPreference": map[string]any{"staticWeightList": list}}
	default:
		placement["replicaScheduling"] = map[string]any{"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
			"weightPreference": map[string]any{"dynamicWeight": "AvailableReplicas"}}
		if p.Spec.MinClusters > 0 || p.Spec.MaxClusters > 0 {
			// Karmada selects at most maxGroups clusters, and 0 selects none.
			maxGroups := p.Spec.MaxClusters
			if maxGroups == 0 {
				maxGroups = len(p.Spec.Clusters)
			}
			if maxGroups == 0 {
				maxGroups = unboundedClusters
			}
			placement["spreadConstraints"] = []any{map[string]any{"spreadByField": "cluster",
				"minGroups": int64(max(p.Spec.MinClusters, 1)), "maxGroups": int64(maxGroups)}}
		}
	}
	after, _ := p.failoverAfter()
	toleration := map[string]any{"key": NotReadyTaint, "operator": "Exists", "effect": "NoExecute"}
	if after >= 0 {
		toleration["tolerationSeconds"] = int64(after / time.Second)
	}
	placement["clusterTolerations"] = []any{toleration}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
		"metadata": map[string]any{"name": "trellis-" + p.Metadata.Name, "namespace": p.Metadata.Namespace,
			"labels": map[string]any{ManagedByLabel: ManagedBy}},
		"spec": map[string]any{
			"resourceSelectors": selectors,
			"propagateDeps":     true,
			"placement":         placement,
			// Members' objects that predate the fleet (the same workload
			// applied to the member directly) are taken over, not left.
			"conflictResolution": "Overwrite",
			"failover":           map[string]any{"cluster": map[string]any{"purgeMode": "Gracefully"}},
		},
	}}
}

// TaintPolicy is the fleet's ClusterTaintPolicy: a NoExecute taint on every
// member whose Ready condition is not True, removed when it is again.
// Placements tolerate it for their FailoverAfter.
func TaintPolicy() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy",
		"metadata": map[string]any{"name": "trellis-not-ready", "labels": map[string]any{ManagedByLabel: ManagedBy}},
		"spec": map[string]any{
			"addOnConditions":    []any{map[string]any{"conditionType": "Ready", "operator": "NotIn", "statusValues": []any{"True"}}},
			"removeOnConditions": []any{map[string]any{"conditionType": "Ready", "operator": "In", "statusValues": []any{"True"}}},
			"taints":             []any{map[string]any{"key": NotReadyTaint, "effect": "NoExecute"}},
		},
	}}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func stringSlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
