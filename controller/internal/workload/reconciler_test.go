package workload

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
)

type cronJob = *v1alpha1.TrellisCronJob

// base is a Kind of one ConfigMap.
type base struct{ err error }

func (base) Name() string                              { return "TrellisCronJob" }
func (base) New() cronJob                              { return &v1alpha1.TrellisCronJob{} }
func (base) NewList() client.ObjectList                { return &v1alpha1.TrellisCronJobList{} }
func (base) Owns() []client.Object                     { return []client.Object{&corev1.ConfigMap{}} }
func (base) Templates(cronJob) []*v1alpha1.PodTemplate { return nil }
func (base) Status(o cronJob) (any, *v1alpha1.CommonStatus) {
	return &o.Status, &o.Status.CommonStatus
}

func (k base) Translate(o cronJob, _ *inject.Profile) ([]client.Object, error) {
	if k.err != nil {
		return nil, k.err
	}
	return []client.Object{configMap(o, o.Name)}, nil
}

// observed is an Observer kind, ready once its ConfigMap exists.
type observed struct{ base }

func (observed) Observe(_ context.Context, _ client.Reader, o cronJob) (Outcome, error) {
	o.Status.Active = 1
	return Progress(true, "fine"), nil
}

// planned is a Planner kind with create-only objects: Done ends the pass
// before any profile; else one step per name.
type planned struct {
	base
	done  bool
	steps []string
	ran   *[]string
}

func (planned) CreateOnly(client.Object) bool { return true }

func (k planned) Plan(_ context.Context, _ Env, o cronJob) (Plan, error) {
	o.Status.Active = 7
	p := Plan{Done: k.done, Observe: func(context.Context) (Outcome, error) { return Outcome{Reason: "Planned"}, nil }}
	for _, name := range k.steps {
		p.Steps = append(p.Steps, func(*inject.Profile) ([]client.Object, error) {
			*k.ran = append(*k.ran, name)
			return []client.Object{configMap(o, name)}, nil
		})
	}
	return p, nil
}

func configMap(owner cronJob, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: OwnedMeta(owner, "TrellisCronJob", name, owner.Name),
		Data:       map[string]string{"k": "v"},
	}
}

type profiles struct{ calls int }

func (p *profiles) Get(context.Context) (*inject.Profile, error) { return inject.DefaultProfile(), nil }
func (p *profiles) For(context.Context, string, string) (*inject.Profile, time.Duration, error) {
	p.calls++
	prof := inject.DefaultProfile()
	prof.Revision = "r2"
	return prof, time.Minute, nil
}

type recorder struct{ events []string }

func (r *recorder) Eventf(_, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.events = append(r.events, fmt.Sprintf("%s %s %s: %s", eventtype, reason, action, fmt.Sprintf(note, args...)))
}

type harness struct {
	c        client.Client
	events   *recorder
	profiles *profiles
	r        *Reconciler[cronJob]
}

func setup(t *testing.T, k Kind[cronJob], objs ...client.Object) *harness {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cj := &v1alpha1.TrellisCronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "default", UID: "uid-nightly", Generation: 3}}
	c := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(cj).WithObjects(append(objs, cj)...).Build()
	h := &harness{c: c, events: &recorder{}, profiles: &profiles{}}
	r, err := NewReconciler(k, Env{Clients: Clients{Client: c, Cache: c, APIReader: c}, Events: h.events}, h.profiles)
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	return h
}

func (h *harness) reconcile(t *testing.T) (*v1alpha1.TrellisCronJob, reconcile.Result, error) {
	t.Helper()
	key := client.ObjectKey{Namespace: "default", Name: "nightly"}
	res, err := h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key})
	got := &v1alpha1.TrellisCronJob{}
	if gerr := h.c.Get(context.Background(), key, got); gerr != nil {
		t.Fatal(gerr)
	}
	return got, res, err
}

func condition(t *testing.T, o *v1alpha1.TrellisCronJob, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(o.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("no %s condition in %+v", typ, o.Status)
	}
	return *c
}

func TestReconcileCreatesThenObserves(t *testing.T) {
	h := setup(t, observed{})
	got, res, err := h.reconcile(t)
	if err != nil || res.RequeueAfter != time.Minute {
		t.Fatalf("creating pass: %v, %+v", err, res)
	}
	if got.Status.ObservedGeneration != 0 {
		t.Errorf("creating pass wrote status %+v; the new objects' events bring the object back", got.Status)
	}
	got, res, err = h.reconcile(t)
	if err != nil || res.RequeueAfter != time.Minute {
		t.Fatalf("observing pass: %v, %+v", err, res)
	}
	c := condition(t, got, v1alpha1.ConditionReady)
	if c.Status != metav1.ConditionTrue || c.Reason != ReasonAvailable || got.Status.Active != 1 || got.Status.ObservedGeneration != 3 || got.Status.RuntimeProfile != "r2" {
		t.Errorf("observing pass: %+v", got.Status)
	}
}

func TestReconcileTranslationErrors(t *testing.T) {
	h := setup(t, observed{base{err: fmt.Errorf("container lacks limits: %w", inject.ErrResourcesRequired)}})
	got, res, err := h.reconcile(t)
	if err != nil || res != (reconcile.Result{}) {
		t.Fatalf("terminal error: %v, %+v", err, res)
	}
	if c := condition(t, got, v1alpha1.ConditionDegraded); c.Status != metav1.ConditionTrue || c.Reason != ReasonInvalidSpec {
		t.Errorf("terminal error: Degraded %+v", c)
	}
	want := []string{"Warning InvalidSpec Translate: container lacks limits: " + inject.ErrResourcesRequired.Error()}
	if diff := cmp.Diff(want, h.events.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	boom := errors.New("boom")
	h = setup(t, observed{base{err: boom}})
	if got, _, err := h.reconcile(t); !errors.Is(err, boom) || len(got.Status.Conditions) != 0 || len(h.events.events) != 0 {
		t.Errorf("retryable error: %v, %+v, %v", err, got.Status, h.events.events)
	}
}

func TestReconcilePlanDone(t *testing.T) {
	h := setup(t, planned{done: true})
	got, res, err := h.reconcile(t)
	if err != nil || res != (reconcile.Result{}) {
		t.Fatalf("%v, %+v", err, res)
	}
	if h.profiles.calls != 0 || got.Status.Active != 7 || got.Status.ObservedGeneration != 3 || got.Status.RuntimeProfile != "" {
		t.Errorf("a done plan chose a profile (%d calls) or lost its status %+v", h.profiles.calls, got.Status)
	}
}

func TestReconcileStepsStopAtConflict(t *testing.T) {
	taken := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: "default"}}
	var ran []string
	h := setup(t, planned{steps: []string{"first", "taken", "after"}, ran: &ran}, taken)
	got, res, err := h.reconcile(t)
	if err != nil || res != (reconcile.Result{}) {
		t.Fatalf("%v, %+v", err, res)
	}
	if diff := cmp.Diff([]string{"first", "taken"}, ran); diff != "" {
		t.Errorf("steps run (-want +got):\n%s", diff)
	}
	if c := condition(t, got, v1alpha1.ConditionDegraded); c.Reason != ReasonConflict {
		t.Errorf("Degraded %+v", c)
	}
	if len(h.events.events) != 1 || h.events.events[0][:len("Warning Conflict Create")] != "Warning Conflict Create" {
		t.Errorf("an Immutable kind's conflict event: %v", h.events.events)
	}
}

func TestNewReconcilerNeedsObserverOrPlanner(t *testing.T) {
	type neither struct{ Kind[cronJob] }
	if _, err := NewReconciler[cronJob](neither{observed{}}, Env{}, nil); err == nil {
		t.Error("a kind that neither observes nor plans was accepted")
	}
}
