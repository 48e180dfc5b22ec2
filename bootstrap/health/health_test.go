package health

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/config/manifests"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

func node(name, group string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelInstanceGroup: group}}}
}

func setNodeReady(t *testing.T, c kubernetes.Interface, name string, ready bool) {
	t.Helper()
	ctx := context.Background()
	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func criticalPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem},
		Spec: corev1.PodSpec{
			PriorityClassName: "system-cluster-critical",
			Containers:        []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

func setPodReady(t *testing.T, c kubernetes.Interface, p *corev1.Pod, ready bool) {
	t.Helper()
	ctx := context.Background()
	p, err := c.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if _, err := c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func daemonSet(name string) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: AddonNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "trellis/" + name}}},
			},
		},
	}
}

func TestIntegrationValidate(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	c := cp.Client
	ctx := context.Background()
	l, err := definition.Load("../../clusters/staging-us-west-2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	def := l.ClusterDefinition

	// Nothing there yet: every group short and every addon missing.
	r, err := Validate(ctx, c, def)
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid {
		t.Fatal("empty cluster validated")
	}
	wantFailures := 3 + len(def.Addons) // three groups short (ci-spot may be empty), every addon missing
	if len(r.Failures) != wantFailures {
		t.Errorf("want %d failures, got %+v", wantFailures, r.Failures)
	}

	for _, n := range []*corev1.Node{node("cp-a", "control-plane-us-west-2a"), node("general-1", "general"), node("general-2", "general"), node("arm-1", "general-arm64")} {
		if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setNodeReady(t, c, n.Name, true)
	}
	apiPod := criticalPod("kube-apiserver-cp-a")
	if _, err := c.CoreV1().Pods(metav1.NamespaceSystem).Create(ctx, apiPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setPodReady(t, c, apiPod, true)
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: AddonNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, a := range def.Addons {
		if info, _ := manifests.Lookup(a.Name); len(info.FlowSchemas) > 0 {
			continue
		}
		ds, err := c.AppsV1().DaemonSets(AddonNamespace).Create(ctx, daemonSet(a.Name), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 3, NumberAvailable: 3, CurrentNumberScheduled: 3}
		if _, err := c.AppsV1().DaemonSets(AddonNamespace).UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The flowcontrol addon runs nothing: its FlowSchemas are what is
	// checked. One missing, then one dangling (no priority level).
	r, err = Validate(ctx, c, def)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Failures) != 1 || r.Failures[0].Message != "not installed: no FlowSchema trellis-system, trellis-tenants" {
		t.Fatalf("without FlowSchemas: %+v", r.Failures)
	}
	for _, name := range []string{"trellis-system", "trellis-tenants"} {
		fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flowcontrolv1.FlowSchemaSpec{
			MatchingPrecedence:         8500,
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: name + "-missing"},
		}}
		if name == "trellis-system" {
			fs.Spec.PriorityLevelConfiguration.Name = "workload-high"
		}
		if _, err := c.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventuallyValid := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			r, err = Validate(ctx, c, def)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range r.Failures {
				got = append(got, f.Message)
			}
			if strings.Join(got, "; ") == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("failures %q, want %q", got, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// The apiserver marks a FlowSchema whose level does not exist dangling.
	eventuallyValid(`FlowSchema trellis-tenants is dangling: This FlowSchema references the PriorityLevelConfiguration object named "trellis-tenants-missing" but there is no such object`)
	fs, err := c.FlowcontrolV1().FlowSchemas().Get(ctx, "trellis-tenants", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fs.Spec.PriorityLevelConfiguration.Name = "workload-low"
	if _, err := c.FlowcontrolV1().FlowSchemas().Update(ctx, fs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyValid("")
	if !r.Valid {
		t.Fatalf("want valid, got %+v", r.Failures)
	}

	// A node going NotReady and a critical pod failing are both reported.
	setNodeReady(t, c, "general-2", false)
	setPodReady(t, c, apiPod, false)
	r, err = Validate(ctx, c, def)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range r.Failures {
		got = append(got, f.Kind+"/"+f.Name)
	}
	want := "InstanceGroup/general Node/general-2 Pod/kube-system/kube-apiserver-cp-a"
	if strings.Join(got, " ") != want {
		t.Errorf("failures: got %v, want %s", got, want)
	}
}
