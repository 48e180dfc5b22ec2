package gateway

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/gateway/api"
)

var (
	namespaceGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	// ClusterGVR is Karmada's member cluster.
	ClusterGVR = schema.GroupVersionResource{Group: "cluster.karmada.io", Version: "v1alpha1", Resource: "clusters"}
)

// submitToFleet is submit for a workload with a placement: authorized,
// checked and written the same way (the quota check reads the fleet's
// FederatedResourceQuotas; a submission id is replayed or refused as
// on the cluster), but against the fleet's apiserver, with the
// placement's PropagationPolicy beside it. A namespace the fleet does not
// have yet is made there with the first write. The gateway's cache is its
// own cluster's, so the answer does not wait for a cache.
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
	nsInFleet, existing, err := g.fleetWorkload(ctx, sub)
	if err != nil {
		q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
		return
	}
	verb := "create"
	if existing != nil {
		verb = "update"
	}
	if !q.authorize(ns, sub.kind.Resource, verb) {
		return
	}
	subID := q.r.Header.Get(api.HeaderSubmissionID)
	q.rec.SubmissionID = subID
	if subID != "" {
		if msg := validSubmissionID(subID); msg != "" {
			q.fail(http.StatusBadRequest, "Invalid", msg, []api.Problem{{Check: "decode", Field: "header " + api.HeaderSubmissionID, Message: msg}})
			return
		}
		lock := &g.locks[lockIndex(fleetKey(ns)+"/"+subID)]
		lock.Lock()
		defer lock.Unlock()
		// Read again under the lock: a request that held it may have
		// written since.
		if nsInFleet, existing, err = g.fleetWorkload(ctx, sub); err != nil {
			q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
			return
		}
		prev, conflict, err := g.previousInFleet(ctx, ns, subID, sub.Digest, nsInFleet)
		switch {
		case err != nil:
			q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
			return
		case conflict != "":
			q.fail(http.StatusConflict, "Conflict", conflict, nil)
			return
		case prev != nil && !dryRun:
			g.replay(q, prev)
			return
		}
	}
	if !nsInFleet {
		// A fleet namespace goes to every member (Karmada's namespace
		// sync), with its own quota and labels: the platform team makes it
		// (trellis fleet place does), not a workload's submission.
		msg := fmt.Sprintf("namespace %s is not in the fleet: the platform team makes it there (trellis fleet place does); the gateway makes no namespace", ns)
		q.fail(http.StatusUnprocessableEntity, "Invalid", msg, []api.Problem{{Check: "placement", Field: "metadata.namespace", Message: msg}})
		return
	}
	members, err := g.placementMembers(ctx, p)
	if err != nil {
		q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
		return
	}
	res, probs, err := g.check(ctx, q, sub, existing, q.r.Header.Get(api.HeaderSignature), g.fleet, &fleetTarget{placement: p, members: members})
	q.rec.Checks = res.Checks
	if err != nil {
		g.metrics.submissions.WithLabelValues("failed").Inc()
		q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
		return
	}
	pp := p.PropagationPolicy()
	res.Placement = ns + "/" + pp.GetName()
	// The policy is dry-run even when a check refused, so that Karmada's
	// own refusal of it is among the problems too.
	if pprobs, err := g.checkPolicy(ctx, pp, fieldManager(q.id)); err != nil {
		g.metrics.submissions.WithLabelValues("failed").Inc()
		q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
		return
	} else {
		probs = append(probs, pprobs...)
	}
	if len(probs) > 0 {
		g.metrics.submissions.WithLabelValues("refused").Inc()
		q.fail(http.StatusUnprocessableEntity, "Invalid", problemsMessage(probs), probs)
		return
	}
	res.SubmissionID = subID
	if dryRun {
		q.rec.Result = res.Action
		q.ok(http.StatusOK, res)
		return
	}
	written, err := g.writeToFleet(ctx, sub, q.id, subID, pp)
	if err != nil {
		g.writeFailed(q, err)
		return
	}
	setWritten(res, existing, written)
	res.Warnings = append(res.Warnings, "placed in the fleet: this gateway's reads show its own cluster; the members' gateways show the workload once Karmada has propagated it")
	if subID != "" {
		g.results.put(fleetKey(ns), subID, sub.Digest, res)
	}
	g.written(q, res)
}

// fleetTarget is a placed submission's placement and the fleet's members
// it can select now (for the quota check only: the policy keeps the
// placement's own selectors, so members that join later count too).
type fleetTarget struct {
	placement *fleet.Placement
	members   []string
}

// fleetKey keeps the fleet's submission ids apart from the cluster's in
// the results this replica remembers.
func fleetKey(ns string) string { return "fleet:" + ns }

// fleetWorkload reads whether the fleet has the submission's namespace,
// and the fleet's copy of the workload when it has one.
func (g *Gateway) fleetWorkload(ctx context.Context, sub *Submission) (bool, client.Object, error) {
	ns := sub.Obj.GetNamespace()
	switch _, err := g.fleet.Resource(namespaceGVR).Get(ctx, ns, metav1.GetOptions{}); {
	case apierrors.IsNotFound(err):
		return false, nil, nil
	case err != nil:
		return false, nil, fmt.Errorf("failed to read namespace %s in the fleet: %w", ns, err)
	}
	u, err := g.fleet.Resource(sub.kind.GVR()).Namespace(ns).Get(ctx, sub.Obj.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil, nil
	case err != nil:
		return true, nil, fmt.Errorf("failed to read the fleet's workload: %w", err)
	}
	return true, u, nil
}

// placementMembers are the fleet's members a placement can select now:
// those it names (all when it names none) whose labels match its
// clusterLabels, as Karmada's cluster affinity requires both.
func (g *Gateway) placementMembers(ctx context.Context, p *fleet.Placement) ([]string, error) {
	list, err := g.fleet.Resource(ClusterGVR).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(p.Spec.ClusterLabels).String()})
	if err != nil {
		return nil, fmt.Errorf("failed to list the fleet's members: %w", err)
	}
	names := []string{}
	for _, c := range list.Items {
		if len(p.Spec.Clusters) == 0 || slices.Contains(p.Spec.Clusters, c.GetName()) {
			names = append(names, c.GetName())
		}
	}
	return names, nil
}

// checkPolicy dry-runs the placement's PropagationPolicy in the fleet and
// returns Karmada's refusal as problems.
func (g *Gateway) checkPolicy(ctx context.Context, pp *unstructured.Unstructured, manager string) ([]api.Problem, error) {
	_, err := g.fleet.Resource(PropagationPolicyGVR).Namespace(pp.GetNamespace()).Apply(ctx, pp.GetName(), pp,
		metav1.ApplyOptions{FieldManager: manager, Force: true, DryRun: []string{metav1.DryRunAll}})
	if err == nil {
		return nil, nil
	}
	probs := apiProblems(err)
	if probs == nil {
		return nil, fmt.Errorf("failed to check the placement in the fleet: %w", err)
	}
	for i := range probs {
		probs[i].Check, probs[i].Field = "placement", strings.TrimSpace("Placement "+probs[i].Field)
	}
	return probs, nil
}

// writeToFleet applies the placement's PropagationPolicy, then the
// workload: a retry of a failed write finds no workload and writes both,
// and a policy never waits for a workload that a replay would skip.
func (g *Gateway) writeToFleet(ctx context.Context, sub *Submission, id *Identity, subID string, pp *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ns := sub.Obj.GetNamespace()
	if _, err := g.fleet.Resource(PropagationPolicyGVR).Namespace(ns).Apply(ctx, pp.GetName(), pp, metav1.ApplyOptions{FieldManager: fieldManager(id), Force: true}); err != nil {
		return nil, fmt.Errorf("failed to write the placement's PropagationPolicy %s/%s to the fleet (nothing else written): %w", ns, pp.GetName(), err)
	}
	written, err := applyTo(ctx, g.fleet, sub, id, subID, false)
	if err != nil {
		return nil, fmt.Errorf("failed to write the workload to the fleet (its policy is written; submit again): %w", err)
	}
	return written, nil
}
