package gateway

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// submitToFleet is submit for a workload with a placement: authorized,
// checked and written the same way, but against the fleet's apiserver,
// with the placement's PropagationPolicy beside it. The gateway's cache
// is its own cluster's, so the answer does not wait for a cache.
func (g *Gateway) submitToFleet(q *request, sub *Submission, doc []byte, dryRun bool) {
	ctx := q.r.Context()
	ns, name := sub.Obj.GetNamespace(), sub.Obj.GetName()
	q.rec.Namespace, q.rec.Kind, q.rec.Name, q.rec.Digest = ns, sub.kind.Kind, name, sub.Digest
	if g.fleet == nil {
		msg := "this gateway places nothing in a fleet (it runs without --fleet): submit the workload without its Placement, or to the fleet's gateway"
		q.fail(http.StatusBadRequest, "Invalid", msg, []api.Problem{{Check: "placement", Field: "Placement", Message: msg}})
		return
	}
	p, probs := decodePlacement(doc, sub)
	if probs != nil {
		q.fail(http.StatusBadRequest, "Invalid", problemsMessage(probs), probs)
		return
	}
	var existing client.Object
	switch u, err := g.fleet.Resource(sub.kind.GVR()).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); {
	case apierrors.IsNotFound(err):
	case err != nil:
		q.fail(http.StatusServiceUnavailable, "Unavailable", "failed to read the fleet's workload: "+err.Error(), nil)
		return
	default:
		existing = u
	}
	verb := "create"
	if existing != nil {
		verb = "update"
	}
	if !q.authorize(ns, sub.kind.Resource, verb) {
		return
	}
	res, probs, err := g.check(ctx, q, sub, existing, q.r.Header.Get(api.HeaderSignature), g.fleet)
	q.rec.Checks = res.Checks
	if err != nil {
		g.metrics.submissions.WithLabelValues("failed").Inc()
		q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
		return
	}
	pp := p.PropagationPolicy()
	res.Placement = ns + "/" + pp.GetName()
	opts := metav1.ApplyOptions{FieldManager: fieldManager(q.id), Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	// The policy is applied (or dry-run) even when a check refused, so
	// that Karmada's own refusal of it is among the problems too.
	if _, err := g.fleet.Resource(PropagationPolicyGVR).Namespace(ns).Apply(ctx, pp.GetName(), pp, metav1.ApplyOptions{FieldManager: opts.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}}); err != nil {
		pprobs := apiProblems(err)
		if pprobs == nil {
			g.metrics.submissions.WithLabelValues("failed").Inc()
			q.fail(http.StatusServiceUnavailable, "Unavailable", "failed to check the placement in the fleet: "+err.Error(), nil)
			return
		}
		for i := range pprobs {
			pprobs[i].Check, pprobs[i].Field = "placement", strings.TrimSpace("Placement "+pprobs[i].Field)
		}
		probs = append(probs, pprobs...)
	}
	if len(probs) > 0 {
		g.metrics.submissions.WithLabelValues("refused").Inc()
		q.fail(http.StatusUnprocessableEntity, "Invalid", problemsMessage(probs), probs)
		return
	}
	subID := q.r.Header.Get(api.HeaderSubmissionID)
	res.SubmissionID = subID
	if dryRun {
		q.rec.Result = res.Action
		q.ok(http.StatusOK, res)
		return
	}
	written, err := applyTo(ctx, g.fleet, sub, q.id, subID, false)
	if err == nil {
		_, err = g.fleet.Resource(PropagationPolicyGVR).Namespace(ns).Apply(ctx, pp.GetName(), pp, opts)
	}
	if err != nil {
		g.metrics.submissions.WithLabelValues("failed").Inc()
		q.fail(http.StatusServiceUnavailable, "Unavailable", "failed to write to the fleet: "+err.Error(), nil)
		return
	}
	setWritten(res, existing, written)
	res.Warnings = append(res.Warnings, "placed in the fleet: this gateway's reads show its own cluster, not the fleet")
	q.rec.Result, q.rec.ResourceVersion = res.Action, res.ResourceVersion
	g.metrics.submissions.WithLabelValues(res.Action).Inc()
	code := http.StatusOK
	if res.Action == api.ActionCreated {
		code = http.StatusCreated
	}
	q.ok(code, res)
}
