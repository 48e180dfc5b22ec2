package gateway

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/gateway/api"
)

// submit takes one workload: authenticate, rate-limit, decode, authorize,
// replay or refuse a reused submission id, run every check (collecting
// every problem), then dry-run or apply, and wait until the cache holds
// the write.
func (g *Gateway) submit(w http.ResponseWriter, r *http.Request) {
	dryRun := r.URL.Query().Get(api.QueryDryRun) == "true"
	action := "submit"
	if dryRun {
		action = "dry-run"
	}
	q := g.newRequest(w, r, action)
	r = q.r
	if !q.authenticate() {
		return
	}
	// The rate limit is taken first, although it is listed last among the
	// checks: refused work must not be free either.
	if ok, after := g.limiter.Allow(q.id.User); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds(after)))
		q.fail(http.StatusTooManyRequests, "TooManyRequests", "submission rate limit of "+q.id.User+" reached: retry after "+strconv.Itoa(RetryAfterSeconds(after))+"s", nil)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		q.fail(http.StatusRequestEntityTooLarge, "TooLarge", "the body is over the limit of 1 MiB: submit one workload at a time", nil)
		return
	}
	if err != nil {
		q.fail(http.StatusBadRequest, "BadRequest", "failed to read the body: "+err.Error(), nil)
		return
	}
	body, placementDoc := splitPlacement(body)
	sub, probs := Decode(body)
	if probs != nil {
		q.fail(http.StatusBadRequest, "Invalid", problemsMessage(probs), probs)
		return
	}
	if placementDoc != nil {
		g.submitToFleet(q, sub, placementDoc, dryRun)
		return
	}
	ns, name := sub.Obj.GetNamespace(), sub.Obj.GetName()
	q.rec.Namespace, q.rec.Kind, q.rec.Name, q.rec.Digest = ns, sub.kind.Kind, name, sub.Digest
	existing := sub.kind.New()
	switch err := g.cache.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, existing); {
	case apierrors.IsNotFound(err):
		existing = nil
	case err != nil:
		q.fail(http.StatusServiceUnavailable, "Unavailable", "failed to read the running workload: "+err.Error(), nil)
		return
	}
	verb := "create"
	if existing != nil {
		verb = "update"
	}
	if !q.authorize(ns, sub.kind.Resource, verb) {
		return
	}
	subID := r.Header.Get(api.HeaderSubmissionID)
	q.rec.SubmissionID = subID
	if subID != "" {
		if msg := validSubmissionID(subID); msg != "" {
			q.fail(http.StatusBadRequest, "Invalid", msg, []api.Problem{{Check: "decode", Field: "header " + api.HeaderSubmissionID, Message: msg}})
			return
		}
		lock := &g.locks[lockIndex(ns+"/"+subID)]
		lock.Lock()
		defer lock.Unlock()
		if prev, conflict := g.previous(r.Context(), ns, subID, sub.Digest); conflict != "" {
			q.fail(http.StatusConflict, "Conflict", conflict, nil)
			return
		} else if prev != nil && !dryRun {
			g.replay(q, prev)
			return
		}
	}
	res, probs, err := g.check(r.Context(), q, sub, existing, r.Header.Get(api.HeaderSignature), g.dyn, nil)
	q.rec.Checks = res.Checks
	if err != nil {
		g.metrics.submissions.WithLabelValues("failed").Inc()
		q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
		return
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
	written, err := g.apply(r.Context(), sub, q.id, subID, false)
	if err != nil {
		g.writeFailed(q, fmt.Errorf("failed to write the workload: %w", err))
		return
	}
	setWritten(res, existing, written)
	waitStart := time.Now()
	err = g.waitFor(r.Context(), sub.kind, ns, name, written.GetResourceVersion())
	q.cache = time.Since(waitStart)
	if err != nil {
		res.Warnings = append(res.Warnings, "written, but the gateway's cache has not caught up yet: "+err.Error())
	}
	if subID != "" {
		g.results.put(ns, subID, sub.Digest, res)
	}
	g.written(q, res)
}

// check runs every check in order and returns every problem: schema (a
// server-side dry-run apply: the CRD's schema and CEL rules), validation
// (the admission webhook's code), provenance, signature, quota. The dry
// run's result gives the diff.
// The schema check's dry run goes to dyn: this cluster's apiserver, or the
// fleet's for a placed submission, whose quota check reads the fleet's
// FederatedResourceQuotas for the members its placement selects.
func (g *Gateway) check(ctx context.Context, q *request, sub *Submission, existing client.Object, signature string, dyn dynamic.Interface, ft *fleetTarget) (*api.SubmitResult, []api.Problem, error) {
	res := &api.SubmitResult{Kind: sub.kind.Kind, Namespace: sub.Obj.GetNamespace(), Name: sub.Obj.GetName(), DryRun: true, FieldManager: fieldManager(q.id)}
	var all []api.Problem
	record := func(name string, probs []api.Problem, skipped bool) {
		result := api.CheckPassed
		switch {
		case skipped:
			result = api.CheckSkipped
		case len(probs) > 0:
			result = api.CheckRefused
		}
		res.Checks = append(res.Checks, api.CheckResult{Name: name, Result: result})
		all = append(all, probs...)
	}
	// schema
	dry, err := applyTo(ctx, dyn, sub, q.id, "", true)
	if err != nil {
		p := apiProblems(err)
		if p == nil {
			return res, nil, err
		}
		record("schema", p, false)
	} else {
		record("schema", nil, false)
		res.Diff, res.Action = diff(existing, dry)
	}
	// validation: the admission webhook's validator, in process.
	warnings, err := g.admission.Validate(ctx, sub.Obj)
	var vprobs []api.Problem
	if err != nil {
		vprobs = []api.Problem{{Check: "validation", Field: webhookField(sub.Raw, err.Error()), Message: err.Error()}}
	}
	res.Warnings = append(res.Warnings, warnings...)
	record("validation", vprobs, false)
	policy, err := g.policy(ctx)
	if err != nil {
		return res, nil, err
	}
	record("provenance", checkProvenance(sub.Raw, policy), false)
	skipped, sprobs := checkSignature(sub.Canonical, signature, policy)
	record("signature", sprobs, skipped)
	var qprobs []api.Problem
	if ft != nil {
		qprobs, err = g.checkFleetQuota(ctx, sub, existing, ft)
	} else {
		qprobs, err = g.checkQuota(ctx, sub, existing)
	}
	if err != nil {
		return res, nil, err
	}
	record("quota", qprobs, false)
	res.Checks = append(res.Checks, api.CheckResult{Name: "ratelimit", Result: api.CheckPassed})
	return res, all, nil
}

// checkQuota compares what the workload's pods will take, less what its
// running version takes, with the namespace's ResourceQuotas.
func (g *Gateway) checkQuota(ctx context.Context, sub *Submission, existing client.Object) ([]api.Problem, error) {
	var quotas corev1.ResourceQuotaList
	if err := g.cache.List(ctx, &quotas, client.InNamespace(sub.Obj.GetNamespace())); err != nil {
		return nil, fmt.Errorf("failed to list the resource quotas of namespace %s: %w", sub.Obj.GetNamespace(), err)
	}
	if len(quotas.Items) == 0 {
		return nil, nil
	}
	objs, err := g.admission.Translate(ctx, sub.Obj)
	if err != nil {
		// The validation check reports why.
		return nil, nil
	}
	var old corev1.ResourceList
	if existing != nil {
		if prev, err := g.admission.Translate(ctx, existing); err == nil {
			old = Demand(prev)
		}
	}
	return checkQuota(quotas.Items, Demand(objs), old), nil
}

// policy reads the policy ConfigMap from the cache.
func (g *Gateway) policy(ctx context.Context) (*Policy, error) {
	cm := &corev1.ConfigMap{}
	err := g.cache.Get(ctx, client.ObjectKey{Namespace: g.cfg.Namespace, Name: PolicyConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		return ParsePolicy(nil)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read the policy ConfigMap %s/%s: %w", g.cfg.Namespace, PolicyConfigMap, err)
	}
	return ParsePolicy(cm)
}

// apiProblems turns the apiserver's refusal (Invalid with causes, or an
// admission webhook's denial) into problems; nil for other errors.
func apiProblems(err error) []api.Problem {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return nil
	}
	st := se.Status()
	switch {
	case apierrors.IsInvalid(err):
		var out []api.Problem
		if st.Details != nil {
			for _, c := range st.Details.Causes {
				out = append(out, api.Problem{Check: "schema", Field: c.Field, Message: c.Message})
			}
		}
		if len(out) == 0 {
			out = append(out, api.Problem{Check: "schema", Message: st.Message})
		}
		return out
	case apierrors.IsNotFound(err) && st.Details != nil && st.Details.Kind == "namespaces":
		// NamespaceLifecycle: the workload's namespace does not exist.
		return []api.Problem{{Check: "schema", Field: "metadata.namespace", Message: st.Message}}
	case apierrors.IsBadRequest(err), apierrors.IsForbidden(err) && strings.Contains(st.Message, "admission webhook"):
		return []api.Problem{{Check: "schema", Message: st.Message}}
	}
	return nil
}

// webhookField finds the container a webhook message names.
func webhookField(raw map[string]any, msg string) string {
	if _, rest, ok := strings.Cut(msg, `container "`); ok {
		if name, _, ok := strings.Cut(rest, `"`); ok {
			return containerField(raw, name)
		}
	}
	return "spec"
}

func lockIndex(key string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % 64)
}

var _ = unstructured.Unstructured{}

// replay answers a retried submission with its first result.
func (g *Gateway) replay(q *request, prev *api.SubmitResult) {
	res := *prev
	res.Replayed = true
	q.rec.Result = "replayed"
	g.metrics.submissions.WithLabelValues("replayed").Inc()
	q.ok(http.StatusOK, &res)
}

// writeFailed answers a failed write: the apiserver's refusal as a 422
// with its fields, anything else as a 503.
func (g *Gateway) writeFailed(q *request, err error) {
	g.metrics.submissions.WithLabelValues("failed").Inc()
	if p := apiProblems(err); p != nil {
		q.fail(http.StatusUnprocessableEntity, "Invalid", problemsMessage(p), p)
		return
	}
	q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
}

// written answers a submission that was written: 201 when it created the
// workload, else 200, recorded in the audit line and the metrics.
func (g *Gateway) written(q *request, res *api.SubmitResult) {
	q.rec.Result, q.rec.ResourceVersion = res.Action, res.ResourceVersion
	g.metrics.submissions.WithLabelValues(res.Action).Inc()
	code := http.StatusOK
	if res.Action == api.ActionCreated {
		code = http.StatusCreated
	}
	q.ok(code, res)
}

// setWritten records a write's outcome in res: created, updated, or
// unchanged when the apply left the resource version as it was.
func setWritten(res *api.SubmitResult, existing, written client.Object) {
	res.DryRun, res.Diff = false, ""
	res.ResourceVersion, res.Generation = written.GetResourceVersion(), written.GetGeneration()
	res.Action = api.ActionCreated
	if existing != nil {
		res.Action = api.ActionUpdated
		if existing.GetResourceVersion() == written.GetResourceVersion() {
			res.Action = api.ActionUnchanged
		}
	}
}
