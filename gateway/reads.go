package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	apierrors "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/gateway/api"
)

// Every read is served from the informer cache: in steady state it costs
// the apiserver nothing.

func (g *Gateway) list(w http.ResponseWriter, r *http.Request) {
	q := g.newRequest(w, r, "list")
	if !q.authenticate() {
		return
	}
	ns := r.PathValue("namespace")
	ks, ok := q.authorizedKinds(ns, "list")
	if !ok {
		return
	}
	hidden, ok := q.eventsShown(ns)
	if !ok {
		return
	}
	out := api.WorkloadList{Items: []api.Workload{}, EventsHidden: hidden}
	for _, k := range ks {
		l := k.NewList()
		if err := g.cache.List(r.Context(), l, client.InNamespace(ns)); err != nil {
			q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
			return
		}
		objs, err := extractObjects(l)
		if err != nil {
			q.fail(http.StatusInternalServerError, "Internal", err.Error(), nil)
			return
		}
		for _, o := range objs {
			w := summary(k, o)
			if hidden == "" {
				if w.LastEvent, err = g.lastEvent(r.Context(), k, o); err != nil {
					q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
					return
				}
			}
			out.Items = append(out.Items, w)
		}
	}
	slices.SortFunc(out.Items, func(a, b api.Workload) int {
		return strings.Compare(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name)
	})
	q.ok(http.StatusOK, out)
}

func (g *Gateway) get(w http.ResponseWriter, r *http.Request) {
	q := g.newRequest(w, r, "get")
	k, obj, ok := q.workload("get")
	if !ok {
		return
	}
	obj.GetObjectKind().SetGroupVersionKind(k.GVR().GroupVersion().WithKind(k.Kind))
	q.ok(http.StatusOK, obj)
}

func (g *Gateway) status(w http.ResponseWriter, r *http.Request) {
	q := g.newRequest(w, r, "status")
	k, obj, ok := q.workload("get")
	if !ok {
		return
	}
	// The pods and events come from the gateway's cache: the caller must
	// be allowed to list them itself, as kubectl describe would need.
	if !q.authorizeCore(obj.GetNamespace(), "pods", "list") || !q.authorizeCore(obj.GetNamespace(), "events", "list") {
		return
	}
	st := api.Status{Workload: summary(k, obj), Pods: []api.Pod{}, Events: []api.Event{}}
	if m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err == nil {
		if s, ok := m["status"]; ok {
			st.Detail, _ = json.Marshal(s)
		}
	}
	st.Conditions = conditions(obj)
	pods, err := g.pods(r.Context(), k, obj)
	if err != nil {
		q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
		return
	}
	st.Pods = pods
	if st.Events, err = g.events(r.Context(), k, obj); err != nil {
		q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
		return
	}
	q.ok(http.StatusOK, st)
}

func (g *Gateway) eventsOf(w http.ResponseWriter, r *http.Request) {
	q := g.newRequest(w, r, "events")
	k, obj, ok := q.workload("get")
	if !ok {
		return
	}
	if !q.authorizeCore(obj.GetNamespace(), "events", "list") {
		return
	}
	ev, err := g.events(r.Context(), k, obj)
	if err != nil {
		q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
		return
	}
	q.ok(http.StatusOK, api.EventList{Items: ev})
}

// kinds resolves the kind= query (all kinds when empty) or answers 404.
// authorizedKinds is the kinds the request's ?kind= names (all six when
// none), each of which the caller may verb in namespace; false when a kind
// is unknown or refused (the answer is written).
func (q *request) authorizedKinds(namespace, verb string) ([]workloadKind, bool) {
	ks, ok := q.kinds(q.r.URL.Query().Get("kind"))
	if !ok {
		return nil, false
	}
	for _, k := range ks {
		if !q.authorize(namespace, k.Resource, verb) {
			return nil, false
		}
	}
	return ks, true
}

func (q *request) kinds(kind string) ([]workloadKind, bool) {
	if kind == "" {
		return kinds, true
	}
	k, ok := kindByName(kind)
	if !ok {
		q.fail(http.StatusNotFound, "NotFound", fmt.Sprintf("unknown kind %q: want one of %s", kind, strings.Join(kindNames(), ", ")), nil)
		return nil, false
	}
	q.rec.Kind = k.Kind
	return []workloadKind{k}, true
}

// workload authenticates, authorizes verb, and reads the workload of the
// path from the cache; with minResourceVersion it first waits (at most
// ReadYourWrites) until the cache holds that version.
func (q *request) workload(verb string) (workloadKind, client.Object, bool) {
	if !q.authenticate() {
		return workloadKind{}, nil, false
	}
	ks, ok := q.kinds(q.r.PathValue("kind"))
	if !ok {
		return workloadKind{}, nil, false
	}
	k, ns, name := ks[0], q.r.PathValue("namespace"), q.r.PathValue("name")
	q.rec.Name = name
	if !q.authorize(ns, k.Resource, verb) {
		return workloadKind{}, nil, false
	}
	if rv := q.r.URL.Query().Get(api.QueryMinResourceVersion); rv != "" {
		_ = q.g.waitFor(q.r.Context(), k, ns, name, rv)
	}
	obj := k.New()
	if err := q.g.cache.Get(q.r.Context(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		if kerrors.IsNotFound(err) {
			q.fail(http.StatusNotFound, "NotFound", fmt.Sprintf("%s %s/%s not found", k.Kind, ns, name), nil)
		} else {
			q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
		}
		return workloadKind{}, nil, false
	}
	return k, obj, true
}

func (g *Gateway) pods(ctx context.Context, k workloadKind, obj client.Object) ([]api.Pod, error) {
	var l corev1.PodList
	if err := g.cache.List(ctx, &l, client.InNamespace(obj.GetNamespace()), client.MatchingLabels(inject.SelectorLabels(k.Kind, obj.GetName()))); err != nil {
		return nil, fmt.Errorf("failed to list pods: %w", err)
	}
	out := []api.Pod{}
	for _, p := range l.Items {
		ap := api.Pod{Name: p.Name, Phase: string(p.Status.Phase), Node: p.Spec.NodeName, Identity: g.podIdentity(&p),
			IdentityNotBefore: annotatedTime(p.Annotations[wellknown.AnnotationIdentityNotBefore]),
			IdentityNotAfter:  annotatedTime(p.Annotations[wellknown.AnnotationIdentityNotAfter])}
		gated := slices.ContainsFunc(p.Spec.ReadinessGates, func(r corev1.PodReadinessGate) bool { return r.ConditionType == wellknown.ConditionRegistered })
		if gated {
			ap.Registered = string(corev1.ConditionUnknown)
		}
		for _, c := range p.Status.Conditions {
			switch {
			case c.Type == corev1.PodReady:
				ap.Ready = c.Status == corev1.ConditionTrue
			case gated && c.Type == wellknown.ConditionRegistered:
				ap.Registered, ap.RegisteredMessage = string(c.Status), c.Message
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			ap.Restarts += cs.RestartCount
			if cs.State.Waiting != nil && ap.Reason == "" {
				ap.Reason = cs.State.Waiting.Reason
			}
			if cs.State.Terminated != nil && ap.Reason == "" {
				ap.Reason = cs.State.Terminated.Reason
			}
		}
		out = append(out, ap)
	}
	slices.SortFunc(out, func(a, b api.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// podIdentity is the SPIFFE ID the issuer gives a pod: its trust domain,
// namespace and service account.
func (g *Gateway) podIdentity(p *corev1.Pod) string {
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return "spiffe://" + g.cfg.TrustDomain + "/ns/" + p.Namespace + "/sa/" + sa
}

func (g *Gateway) events(ctx context.Context, k workloadKind, obj client.Object) ([]api.Event, error) {
	var l corev1.EventList
	if err := g.cache.List(ctx, &l, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexInvolved: k.Kind + "/" + obj.GetName()}); err != nil {
		return nil, fmt.Errorf("failed to list events: %w", err)
	}
	out := []api.Event{}
	for _, e := range l.Items {
		if e.InvolvedObject.UID != "" && e.InvolvedObject.UID != obj.GetUID() {
			continue // an earlier object of the same name
		}
		t := e.LastTimestamp.Time
		if t.IsZero() {
			t = e.EventTime.Time
		}
		if t.IsZero() {
			t = e.CreationTimestamp.Time
		}
		out = append(out, api.Event{Time: t.UTC(), Type: e.Type, Reason: e.Reason, Message: e.Message, Count: max(e.Count, 1)})
	}
	slices.SortStableFunc(out, func(a, b api.Event) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// summary is a workload's api.Workload.
func summary(k workloadKind, o client.Object) api.Workload {
	w := api.Workload{Kind: k.Kind, Namespace: o.GetNamespace(), Name: o.GetName(), ResourceVersion: o.GetResourceVersion(),
		Generation: o.GetGeneration(), Created: o.GetCreationTimestamp().UTC(), Ready: string(metav1.ConditionUnknown)}
	if m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o); err == nil {
		if st, ok := m["status"].(map[string]any); ok {
			if og, ok := st["observedGeneration"].(int64); ok {
				w.ObservedGeneration = og
			}
		}
		w.Image = templateImages(m)
	}
	for _, c := range conditions(o) {
		if c.Type == "Ready" {
			w.Ready, w.Reason = string(c.Status), c.Reason
		}
	}
	return w
}

// templateImages is the workload's container images, comma separated in
// order: spec.template.containers for five kinds, and each of
// spec.replicaSpecs[].template.containers for a training job.
func templateImages(m map[string]any) string {
	spec, _ := m["spec"].(map[string]any)
	templates := []any{spec["template"]}
	if rs, ok := spec["replicaSpecs"].([]any); ok {
		for _, r := range rs {
			if rm, ok := r.(map[string]any); ok {
				templates = append(templates, rm["template"])
			}
		}
	}
	var out []string
	for _, tpl := range templates {
		tm, _ := tpl.(map[string]any)
		cs, _ := tm["containers"].([]any)
		for _, c := range cs {
			if cm, ok := c.(map[string]any); ok {
				if img, ok := cm["image"].(string); ok && img != "" {
					out = append(out, img)
				}
			}
		}
	}
	return strings.Join(out, ", ")
}

// conditions reads status.conditions of any of the kinds.
func conditions(o client.Object) []metav1.Condition {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil
	}
	st, _ := m["status"].(map[string]any)
	raw, ok := st["conditions"]
	if !ok {
		return nil
	}
	b, _ := json.Marshal(raw)
	var out []metav1.Condition
	_ = json.Unmarshal(b, &out)
	return out
}

func extractObjects(l client.ObjectList) ([]client.Object, error) {
	items, err := apierrors.ExtractList(l)
	if err != nil {
		return nil, fmt.Errorf("failed to extract the items of a %T: %w", l, err)
	}
	out := make([]client.Object, 0, len(items))
	for _, it := range items {
		if o, ok := it.(client.Object); ok {
			out = append(out, o)
		}
	}
	return out, nil
}

var _ = time.Second
