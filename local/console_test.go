package local

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/console"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// holdFinalizer keeps a deleted pod Terminating, as a kubelet does while
// it stops the containers.
const holdFinalizer = "trellis.dev/test-hold"

// TestIntegrationRestartGatewayBesideTerminatingPods is stop 49's CI
// failure: the images step had just deleted the gateway's pods, so the
// console step's restart listed two Terminating pods beside the two new
// ones, and waited for four new Ready pods of a two-replica Deployment.
// The real ReplicaSet controller makes the pods; the test plays the
// kubelet and marks them Ready.
func TestIntegrationRestartGatewayBesideTerminatingPods(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{ControllerManager: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := cp.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, namespace(addons.Namespace), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Two pods the images step deleted, still stopping.
	for _, name := range []string{"gateway-old-0", "gateway-old-1"} {
		p := gatewayPod(name)
		p.Finalizers = []string{holdFinalizer}
		if _, err := c.CoreV1().Pods(addons.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.CoreV1().Pods(addons.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createGateway(ctx, t, c, 2)
	kubelet := markReady(ctx, t, c)
	waitPods(ctx, t, c, 4) // two new, two stopping: the console step's view
	u := &up{client: c, o: Options{Log: slog.New(slog.DiscardHandler), Wait: 40 * time.Second}}
	start := time.Now()
	if err := u.restartGateway(ctx); err != nil {
		t.Fatalf("restart beside two terminating pods: %v", err)
	}
	t.Logf("restarted in %s; the kubelet marked %d pods Ready", time.Since(start).Round(time.Millisecond), kubelet())
	if n := kubelet(); n < 2 {
		t.Errorf("the kubelet marked %d pods Ready, want at least the 2 the restart made", n)
	}
	for _, name := range []string{"gateway-old-0", "gateway-old-1"} {
		_, _ = c.CoreV1().Pods(addons.Namespace).Patch(ctx, name, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
}

// TestIntegrationRestartGatewaySaysWhatItWaitsFor: pods that never turn
// Ready make the restart fail naming them and their state.
func TestIntegrationRestartGatewaySaysWhatItWaitsFor(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{ControllerManager: true})
	ctx := context.Background()
	c := cp.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, namespace(addons.Namespace), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createGateway(ctx, t, c, 1)
	waitPods(ctx, t, c, 1)
	u := &up{client: c, o: Options{Log: slog.New(slog.DiscardHandler), Wait: 5 * time.Second}}
	err := u.restartGateway(ctx)
	if err == nil || !strings.Contains(err.Error(), "0 of 1 new pods Ready: trellis-gateway-") || !strings.Contains(err.Error(), "Pending") {
		t.Fatalf("err = %v, want it to name the new pod, Pending, and 0 of 1 Ready", err)
	}
}

// createGateway creates the gateway's Deployment with replicas pods (the
// real ReplicaSet controller makes them).
func createGateway(ctx context.Context, t *testing.T, c kubernetes.Interface, replicas int32) {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: gatewayName, Namespace: addons.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": gatewayName}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": gatewayName}},
				Spec:       gatewayPod("").Spec,
			},
		},
	}
	if _, err := c.AppsV1().Deployments(addons.Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func gatewayPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: addons.Namespace, Labels: map[string]string{"app.kubernetes.io/name": gatewayName}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "gateway", Image: "registry.trellis.dev/trellis/gateway:0.1.0"}}},
	}
}

// markReady plays the kubelet: every live gateway pod not Ready yet is
// marked Ready. It returns a function that counts the pods it marked.
func markReady(ctx context.Context, t *testing.T, c kubernetes.Interface) func() int {
	t.Helper()
	marked := map[string]bool{}
	done := make(chan struct{})
	count := make(chan int)
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case count <- len(marked):
				continue
			case <-time.After(200 * time.Millisecond):
			}
			l, err := c.CoreV1().Pods(addons.Namespace).List(ctx, metav1.ListOptions{LabelSelector: gatewaySelector})
			if err != nil {
				continue
			}
			for _, p := range l.Items {
				if p.DeletionTimestamp != nil || marked[p.Name] {
					continue
				}
				p.Status.Phase = corev1.PodRunning
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
				if _, err := c.CoreV1().Pods(addons.Namespace).UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err == nil {
					marked[p.Name] = true
				}
			}
		}
	}()
	t.Cleanup(func() { <-done })
	return func() int {
		select {
		case n := <-count:
			return n
		case <-done:
			return len(marked)
		}
	}
}

// waitPods waits until n gateway pods exist (Terminating ones count).
func waitPods(ctx context.Context, t *testing.T, c kubernetes.Interface, n int) {
	t.Helper()
	for {
		l, err := c.CoreV1().Pods(addons.Namespace).List(ctx, metav1.ListOptions{LabelSelector: gatewaySelector})
		if err == nil && len(l.Items) >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %d gateway pods: %v", n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestConsolePasswordsOnANewMachine: the console step writes the users'
// passwords beside the gateway context before the gateway context step
// has made its folder; on a new machine that folder does not exist yet
// (a fresh machine's `make e2e` failed here: "open
// /tmp/trellis-e2e-gateway/trellis-local-console-dev.password: no such
// file or directory").
func TestConsolePasswordsOnANewMachine(t *testing.T) {
	ctxPath := t.TempDir() + "/not/made/yet/context.yaml"
	acc, err := writeConsolePasswords(ctxPath, "trellis-local", "https://127.0.0.1:30443/", consoleSecrets{DevPassword: "dev-pw", GuestPassword: "guest-pw"})
	if err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{acc.PasswordFile: "dev-pw\n", acc.GuestPasswordFile: "guest-pw\n"} {
		b, err := os.ReadFile(f)
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", f, b, err, want)
		}
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", f, fi.Mode().Perm(), err)
		}
	}
}

// TestIntegrationConsoleRolloutsRBAC applies the local console's rollouts
// RBAC on a real apiserver and asks its RBAC what the console asks: the
// dev user may see the rollouts page and pause, resume or abort; the
// guest may do neither.
func TestIntegrationConsoleRolloutsRBAC(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	role, binding := ConsoleRolloutsRBAC()
	for _, o := range []any{role, binding} {
		if err := applyObject(ctx, cp.Client, o); err != nil {
			t.Fatal(err)
		}
	}
	allowed := func(user, resource, verb string) bool {
		res, sub, _ := strings.Cut(resource, "/")
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "oidc:" + user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: console.RolloutGroup, Resource: res, Subresource: sub, Verb: verb,
			},
		}}
		got, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("review %s %s %s: %v", user, verb, resource, err)
		}
		return got.Status.Allowed
	}
	// The apiserver's RBAC authorizer reads roles and bindings from its
	// informers, so a binding just created may not be seen yet (seen once
	// under make test: both of dev's reviews denied right after it).
	// Wait until it is; the guest's denials are then not a lag.
	deadline := time.Now().Add(30 * time.Second)
	for !allowed(ConsoleUser, console.RolloutResource, "get") {
		if time.Now().After(deadline) {
			t.Fatalf("%s get %s: still denied 30s after the binding was created", ConsoleUser, console.RolloutResource)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range []struct {
		user, resource, verb string
		want                 bool
	}{
		{ConsoleUser, console.RolloutResource, "get", true},
		{ConsoleUser, console.RolloutControl, "update", true},
		{ConsoleGuest, console.RolloutResource, "get", false},
		{ConsoleGuest, console.RolloutControl, "update", false},
	} {
		if got := allowed(c.user, c.resource, c.verb); got != c.want {
			t.Errorf("%s %s %s: allowed %t, want %t", c.user, c.verb, c.resource, got, c.want)
		}
	}
}
