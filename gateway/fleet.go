package gateway

import (
	"bytes"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/gateway/api"
)

// PropagationPolicyGVR is Karmada's policy a placement becomes.
var PropagationPolicyGVR = schema.GroupVersionResource{Group: "policy.karmada.io", Version: "v1alpha1", Resource: "propagationpolicies"}

// splitPlacement takes a fleet Placement document out of a YAML body of
// several documents: it returns the other documents (the workload) and
// the placement's, whose lines keep their numbers, so the placement's
// errors name the body's lines. A body without a placement comes back as it was, with nil.
func splitPlacement(body []byte) (workload, placement []byte) {
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] == '{' {
		return body, nil
	}
	lines := strings.Split(string(body), "\n")
	type doc struct{ from, to int } // lines [from, to)
	var docs []doc
	start := 0
	for i, l := range lines {
		if strings.TrimRight(l, " \t\r") == "---" {
			docs = append(docs, doc{start, i})
			start = i + 1
		}
	}
	docs = append(docs, doc{start, len(lines)})
	isPlacement := make([]bool, len(docs))
	found := false
	for i, d := range docs {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if sigsyaml.Unmarshal([]byte(strings.Join(lines[d.from:d.to], "\n")), &head) == nil &&
			head.APIVersion == fleet.PlacementAPIVersion && head.Kind == fleet.PlacementKind {
			isPlacement[i], found = true, true
		}
	}
	if !found {
		return body, nil
	}
	// The placement's lines keep their numbers: everything before its
	// document is blank (several placements are refused later, lines
	// aside).
	var w, p []string
	for i, d := range docs {
		if isPlacement[i] {
			if len(p) == 0 {
				p = make([]string, d.from)
			} else {
				p = append(p, "---")
			}
			p = append(p, lines[d.from:d.to]...)
			continue
		}
		if len(w) > 0 {
			w = append(w, "---")
		}
		w = append(w, lines[d.from:d.to]...)
	}
	return []byte(strings.Join(w, "\n")), []byte(strings.Join(p, "\n"))
}

// decodePlacement reads the submission's placement strictly (the fleet's
// own decoder and validation, with the body's lines) and checks that it
// places the submitted workload and nothing else: the caller is
// authorized for that workload only.
func decodePlacement(doc []byte, sub *Submission) (*fleet.Placement, []api.Problem) {
	bad := func(field, format string, args ...any) []api.Problem {
		return []api.Problem{{Check: "placement", Field: field, Message: fmt.Sprintf(format, args...)}}
	}
	ps, err := fleet.DecodePlacements("placement", doc)
	if err != nil {
		return nil, bad("Placement", "%v", err)
	}
	if len(ps) != 1 {
		return nil, bad("Placement", "%d placements: submit one, for the submitted workload", len(ps))
	}
	p := ps[0]
	var probs []api.Problem
	if p.Metadata.Namespace != sub.Obj.GetNamespace() {
		probs = append(probs, bad("Placement metadata.namespace", "placement in %q, the workload in %q: a placement places workloads of its own namespace", p.Metadata.Namespace, sub.Obj.GetNamespace())...)
	}
	if len(p.Spec.Workloads) == 0 {
		probs = append(probs, bad("Placement spec.workloads", "empty: it would place every workload of the namespace; name the submitted %s %s", sub.Kind(), sub.Obj.GetName())...)
	}
	for i, w := range p.Spec.Workloads {
		if w.Kind != sub.Kind() || w.Name != sub.Obj.GetName() {
			probs = append(probs, bad(fmt.Sprintf("Placement spec.workloads[%d]", i), "selects %s %q: a submission's placement selects the submitted %s %s only", w.Kind, w.Name, sub.Kind(), sub.Obj.GetName())...)
		}
	}
	if probs != nil {
		return nil, probs
	}
	return p, nil
}
