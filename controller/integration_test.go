package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

type env struct {
	t  *testing.T
	cp *cluster.ControlPlane
	c  client.Client
}

// startPlane runs a real control plane with the CRDs installed and the
// trellis-system namespace created, and returns a client for it.
func startPlane(t *testing.T, opts cluster.Options) (*cluster.ControlPlane, client.Client) {
	t.Helper()
	cp := cluster.Start(t, opts)
	ctx := context.Background()
	if out, err := cp.Kubectl(ctx, "apply", "--server-side", "-f", "../config/crd/"); err != nil {
		t.Fatalf("install CRDs: %v\n%s", err, out)
	}
	if out, err := cp.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"); err != nil {
		t.Fatalf("CRDs not established: %v\n%s", err, out)
	}
	c, err := client.New(cp.Config, client.Options{Scheme: controller.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: inject.ProfileNamespace}}); err != nil {
		t.Fatal(err)
	}
	return cp, c
}

// startEnv runs a real control plane (with kube-controller-manager, so
// garbage collection and Deployment -> ReplicaSet -> Pods are real), installs
// the CRDs and starts the Trellis controller in-process.
func startEnv(t *testing.T) *env {
	t.Helper()
	cp, c := startPlane(t, cluster.Options{ControllerManager: true})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	mgr, err := controller.New(cp.Config, controller.Config{SkipNameValidation: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return &env{t: t, cp: cp, c: c}
}

func (e *env) eventually(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		e.t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
	}
}

func (e *env) exists(o client.Object) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(o), o)
		return err == nil, err
	}
}

func condition(ts *v1alpha1.TrellisService, typ string) *metav1.Condition {
	return meta.FindStatusCondition(ts.Status.Conditions, typ)
}

func TestIntegrationTrellisService(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()

	ts := gen.Service("web", gen.WithReplicas(2), gen.WithConfig(map[string]string{"app.yaml": "x: 1\n"}), gen.WithIngress("web.example.com"))
	if err := e.c.Create(ctx, ts); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: "default", Name: "web"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	e.eventually("the Deployment", 30*time.Second, e.exists(dep))
	for _, o := range []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-config"}},
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}},
	} {
		e.eventually(fmt.Sprintf("%T", o), 10*time.Second, e.exists(o))
		if !metav1.IsControlledBy(o, tsFromCluster(t, e, key)) {
			t.Errorf("%T web is not controlled by the TrellisService", o)
		}
	}
	// The real Deployment controller makes a ReplicaSet and its Pods, with
	// the runtime injected.
	e.eventually("two pods", 30*time.Second, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := e.c.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels(inject.SelectorLabels("TrellisService", "web"))); err != nil {
			return false, err
		}
		if len(pods.Items) != 2 {
			return false, fmt.Errorf("%d pods", len(pods.Items))
		}
		p := pods.Items[0]
		if len(p.Spec.InitContainers) != 3 || p.Annotations[wellknown.AnnotationDiscoveryService] != "web" {
			return false, fmt.Errorf("runtime not injected: %d init containers, annotations %v", len(p.Spec.InitContainers), p.Annotations)
		}
		return true, nil
	})
	// Status: observed, progressing (no nodes, so nothing becomes available).
	e.eventually("status", 10*time.Second, func(ctx context.Context) (bool, error) {
		got := tsFromCluster(t, e, key)
		c := condition(got, v1alpha1.ConditionProgressing)
		return got.Status.ObservedGeneration == got.Generation && c != nil && c.Status == metav1.ConditionTrue && got.Status.Replicas == 2, nil
	})

	// Drift is repaired.
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
		t.Fatal(err)
	}
	dep.Spec.Replicas = new(int32(7))
	dep.Spec.Template.Spec.Containers[0].Image = "evil:latest"
	if err := e.c.Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	e.eventually("drift repair", 20*time.Second, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
			return false, err
		}
		return *d.Spec.Replicas == 2 && d.Spec.Template.Spec.Containers[0].Image == "registry.example/app:1.0", nil
	})

	// Deleting the TrellisService cascades to what it owns.
	if err := e.c.Delete(ctx, ts); err != nil {
		t.Fatal(err)
	}
	e.eventually("garbage collection", 60*time.Second, func(ctx context.Context) (bool, error) {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(dep), &appsv1.Deployment{})
		return apierrors.IsNotFound(err), err
	})
}

func tsFromCluster(t *testing.T, e *env, key client.ObjectKey) *v1alpha1.TrellisService {
	t.Helper()
	ts := &v1alpha1.TrellisService{}
	if err := e.c.Get(context.Background(), key, ts); err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestIntegrationConflictsAndPolicy(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()

	// Someone else's Service with the name the TrellisService needs.
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "taken"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "x", Port: 1234}}},
	}
	if err := e.c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Create(ctx, gen.Service("taken")); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: "default", Name: "taken"}
	e.eventually("a Conflict condition", 20*time.Second, func(ctx context.Context) (bool, error) {
		c := condition(tsFromCluster(t, e, key), v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "Conflict" && strings.Contains(c.Message, "Service taken"), nil
	})
	if err := e.c.Get(ctx, key, foreign); err != nil {
		t.Fatal(err)
	}
	if len(foreign.OwnerReferences) != 0 || foreign.Spec.Ports[0].Port != 1234 {
		t.Errorf("the foreign Service was modified: %+v", foreign)
	}
	e.eventually("a Conflict event", 10*time.Second, func(ctx context.Context) (bool, error) {
		evs, err := e.cp.Client.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.Regarding.Name == "taken" && ev.Reason == "Conflict" {
				return true, nil
			}
		}
		return false, nil
	})

	// A profile requiring resources rejects a container without them, naming
	// it, and creates nothing.
	profile := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: inject.ProfileNamespace, Name: inject.ProfileName, Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedBy}},
		Data:       map[string]string{inject.ProfileKey: "revision: strict-1\nenv: prod\nresources:\n  policy: Require\n"},
	}
	if err := e.c.Create(ctx, profile); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // let the informer see the profile
	if err := e.c.Create(ctx, gen.Service("sloppy", gen.WithBareContainer("helper"))); err != nil {
		t.Fatal(err)
	}
	skey := client.ObjectKey{Namespace: "default", Name: "sloppy"}
	e.eventually("an InvalidSpec condition", 20*time.Second, func(ctx context.Context) (bool, error) {
		c := condition(tsFromCluster(t, e, skey), v1alpha1.ConditionDegraded)
		return c != nil && c.Reason == "InvalidSpec" && strings.Contains(c.Message, `container "helper"`), nil
	})
	if err := e.c.Get(ctx, skey, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment was created for an invalid spec (%v)", err)
	}
}

// TestIntegrationSamples applies config/samples with kubectl while the
// controller runs, and checks the native objects and the printer columns.
func TestIntegrationSamples(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	if out, err := e.cp.Kubectl(ctx, "apply", "-f", "../config/samples/"); err != nil {
		t.Fatalf("kubectl apply samples: %v\n%s", err, out)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello"}}
	e.eventually("the sample's Deployment", 30*time.Second, e.exists(dep))
	if got := dep.Spec.Template.Annotations[wellknown.AnnotationProfile]; got != "2026-11-22" {
		t.Errorf("pods run with profile %q, want the sample profile 2026-11-22", got)
	}
	e.eventually("printer columns", 40*time.Second, func(ctx context.Context) (bool, error) {
		kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := e.cp.Kubectl(kctx, "get", "trellisservices", "-n", "default")
		if err != nil {
			return false, fmt.Errorf("%v: %s", err, out)
		}
		fields := strings.Fields(out)
		// NAME REPLICAS READY STATUS AGE / hello 2 0 RollingOut ...
		return len(fields) >= 9 && fields[1] == "REPLICAS" && fields[5] == "hello" && fields[6] == "2" && fields[7] == "0" && fields[8] == "RollingOut", fmt.Errorf("%q", out)
	})
}
