package controller_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestIntegrationWebhook serves the admission webhook over TLS to the real
// apiserver: what the controller would refuse is refused at apply time, and
// missing resources are defaulted into the stored spec.
func TestIntegrationWebhook(t *testing.T) {
	cp, c := startPlane(t, cluster.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	profile := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: inject.ProfileNamespace, Name: inject.ProfileName, Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedBy}},
		Data:       map[string]string{inject.ProfileKey: "revision: strict\nresources:\n  policy: Require\n"},
	}
	if err := c.Create(ctx, profile); err != nil {
		t.Fatal(err)
	}

	// The webhook serves with a certificate for 127.0.0.1 signed by the
	// test CA (the apiserver's own serving pair).
	port := freePort(t)
	mgr, err := controller.New(cp.Config, controller.Config{SkipNameValidation: true, Webhook: &controller.WebhookConfig{
		Host: "127.0.0.1", Port: port, CertDir: cp.Dir, CertName: "apiserver.crt", KeyName: "apiserver.key",
	}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	e := &env{t: t, cp: cp, c: c}
	e.eventually("webhook listening", 20*time.Second, func(context.Context) (bool, error) {
		conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", itoa(port)))
		if err == nil {
			conn.Close()
		}
		return err == nil, err
	})
	caPEM, err := os.ReadFile(filepath.Join(cp.Dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	resources := []string{"trellisservices", "trellisjobsets", "trelliscronjobs", "trellisdaemons", "trellisstatefulsets", "trellistrainingjobs"}
	kinds := []string{"trellisservice", "trellisjobset", "trelliscronjob", "trellisdaemon", "trellisstatefulset", "trellistrainingjob"}
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "trellis"}}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "trellis"}}
	for i, res := range resources {
		rule := admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"workloads.trellis.dev"}, APIVersions: []string{"v1alpha1"}, Resources: []string{res}},
		}
		vurl := "https://127.0.0.1:" + itoa(port) + controller.ValidatePathPrefix + kinds[i]
		murl := "https://127.0.0.1:" + itoa(port) + controller.MutatePathPrefix + kinds[i]
		vwc.Webhooks = append(vwc.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name: "v" + kinds[i] + ".workloads.trellis.dev", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &vurl, CABundle: caPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{rule}, FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		})
		mwc.Webhooks = append(mwc.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name: "m" + kinds[i] + ".workloads.trellis.dev", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &murl, CABundle: caPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{rule}, FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		})
	}
	if err := c.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, mwc); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // let the apiserver and the controller's cache see both

	// Require: a container without resources is refused, by name.
	err = c.Create(ctx, gen.Service("sloppy", gen.WithBareContainer("helper")))
	if err == nil || !strings.Contains(err.Error(), `container "helper" lacks`) {
		t.Fatalf("want a refusal naming the container, got %v", err)
	}
	// A daemon outside the allowed namespaces is refused.
	err = c.Create(ctx, &v1alpha1.TrellisDaemon{ObjectMeta: metav1.ObjectMeta{Name: "rogue", Namespace: "default"}, Spec: v1alpha1.TrellisDaemonSpec{Template: v1alpha1.PodTemplate{Containers: []corev1.Container{gen.Container("d")}}}})
	if err == nil || !strings.Contains(err.Error(), "may not run infrastructure daemons") {
		t.Fatalf("want the daemon refused, got %v", err)
	}
	// A shard-config template that cannot render is refused.
	err = c.Create(ctx, &v1alpha1.TrellisJobSet{ObjectMeta: metav1.ObjectMeta{Name: "badtmpl", Namespace: "default"}, Spec: v1alpha1.TrellisJobSetSpec{
		Shards: 2, Template: v1alpha1.PodTemplate{Containers: []corev1.Container{gen.Container("s")}}, ShardConfig: map[string]string{"x": "{{.Nope}}"},
	}})
	if err == nil || !strings.Contains(err.Error(), "shard config") {
		t.Fatalf("want the bad template refused, got %v", err)
	}

	// Default policy: the stored spec gets the profile's resources.
	profile.Data[inject.ProfileKey] = "revision: lenient\nresources:\n  policy: Default\n"
	if err := c.Update(ctx, profile); err != nil {
		t.Fatal(err)
	}
	e.eventually("defaulting", 20*time.Second, func(ctx context.Context) (bool, error) {
		ts := gen.Service("lenient", gen.WithBareContainer("helper"))
		if err := c.Create(ctx, ts); err != nil {
			return false, err
		}
		got := &v1alpha1.TrellisService{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(ts), got); err != nil {
			return false, err
		}
		helper := got.Spec.Template.Containers[1]
		_, ok := helper.Resources.Limits[corev1.ResourceMemory]
		return ok, nil
	})
}

func itoa(i int) string { return strconv.Itoa(i) }
