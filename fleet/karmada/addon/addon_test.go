package addon

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	testclock "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/fleet/karmada"
	"github.com/trellis-dev/trellis/internal/pki"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// TestIntegrationKarmadaAddons applies the management cluster's bundle
// (clusters/fleet-us-east-1.yaml) to a real apiserver: the applier seeds
// the fleet's certificates once, dated by its clock, and never replaces
// them; a forced apply runs the install Job again (a Job's template cannot
// be updated, so it is replaced).
func TestIntegrationKarmadaAddons(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{APIServerFlags: []string{"--allow-privileged=true"}})
	ctx := context.Background()
	a, err := addons.NewApplier(cp.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Lifecycles = []addons.Lifecycle{Lifecycle{}}
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	a.Clock = testclock.NewFakePassiveClock(now)
	// ready plays the kubelets and the StatefulSet controller this control
	// plane does not run: readyMembers of the fleet API's members ready at
	// its generation (a StatefulSet made before, RollingUpdate, gets the
	// renewal's restart only when all are).
	ready := func(readyMembers int32) {
		t.Helper()
		s, err := cp.Client.AppsV1().StatefulSets(addons.Namespace).Get(ctx, KarmadaService, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Status.ObservedGeneration, s.Status.Replicas, s.Status.ReadyReplicas = s.Generation, *s.Spec.Replicas, readyMembers
		if _, err := cp.Client.AppsV1().StatefulSets(addons.Namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rendered, err := addons.Render(load(t, "fleet-us-east-1"), Lifecycle{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(ctx, rendered); err != nil {
		t.Fatal(err)
	}
	s, err := cp.Client.CoreV1().Secrets(addons.Namespace).Get(ctx, KarmadaSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	certs, err := pki.ParseCerts(s.Data[pki.APIServerCert])
	if err != nil {
		t.Fatal(err)
	}
	if !certs[0].NotBefore.Equal(now.Add(-time.Hour)) {
		t.Errorf("apiserver certificate from %s, want the applier's clock (%s) less an hour", certs[0].NotBefore, now)
	}
	for name, server := range map[string]string{KarmadaKubeconfig: KarmadaServer(), KarmadaLocalKubeconfig: "https://127.0.0.1:5443"} {
		kc, err := clientcmd.Load(s.Data[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cfg, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
		if err != nil || cfg.Host != server || !bytes.Equal(cfg.CAData, s.Data[pki.CACert]) || !bytes.Equal(cfg.CertData, s.Data[pki.AdminCert]) {
			t.Errorf("%s: %v, server %q (want %q), or not the fleet's CA and admin certificate", name, err, cfg.Host, server)
		}
	}
	job, err := cp.Client.BatchV1().Jobs(addons.Namespace).Get(ctx, "karmada-install", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The members are replaced by the applier, not by the StatefulSet
	// controller (TestIntegrationFleetMemberRoll): an apply with a member
	// not ready goes through, here a forced one, since applying the
	// template restarts nothing.
	if sts, err := cp.Client.AppsV1().StatefulSets(addons.Namespace).Get(ctx, KarmadaService, metav1.GetOptions{}); err != nil || sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Fatalf("statefulset %s: %v, want the OnDelete strategy", KarmadaService, err)
	}
	a.Force = true
	a.Clock = testclock.NewFakePassiveClock(now.Add(48 * time.Hour))
	ready(2)
	if _, err := a.Apply(ctx, rendered); err != nil {
		t.Fatalf("forced apply with 2 of 3 members ready: %v", err)
	}
	again, err := cp.Client.CoreV1().Secrets(addons.Namespace).Get(ctx, KarmadaSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range s.Data {
		if !bytes.Equal(again.Data[k], v) {
			t.Errorf("%s of %s replaced by a second apply", k, KarmadaSecret)
		}
	}
	rerun, err := cp.Client.BatchV1().Jobs(addons.Namespace).Get(ctx, "karmada-install", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rerun.UID == job.UID {
		t.Error("the install Job was not replaced by a forced apply")
	}
	for _, name := range []string{"karmada-webhook"} {
		d, err := cp.Client.AppsV1().Deployments(addons.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if at := d.Spec.Template.Annotations[KarmadaRenewedAnnotation]; at != "" {
			t.Errorf("%s restarted for a renewal (%s) before any", name, at)
		}
	}

	// A Secret seeded before the fleet's etcd had peers: the next apply
	// adds the etcd CA and peer certificate and restarts nothing (no
	// running member uses them: a fleet API of one member has no peers,
	// and its member count cannot change).
	old := s.DeepCopy()
	for _, k := range []string{pki.EtcdCACert, pki.EtcdCAKey, pki.EtcdPeerCert, pki.EtcdPeerKey} {
		if len(again.Data[k]) == 0 {
			t.Fatalf("%s not seeded", k)
		}
		delete(old.Data, k)
	}
	old.ResourceVersion = ""
	if _, err := cp.Client.CoreV1().Secrets(addons.Namespace).Update(ctx, old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.Force = false
	if _, err := a.Apply(ctx, rendered); err != nil {
		t.Fatal(err)
	}
	if s, err = cp.Client.CoreV1().Secrets(addons.Namespace).Get(ctx, KarmadaSecret, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Annotations[KarmadaRenewedAnnotation]; ok {
		t.Errorf("adding the peer certificate marked %s renewed: its workloads would restart", KarmadaSecret)
	}
	if c, err := pki.ParseCerts(s.Data[pki.EtcdPeerCert]); err != nil || len(c) != 1 || !slices.Contains(c[0].DNSNames, "*."+karmadaPeerDomain()+".cluster.local") {
		t.Errorf("peer certificate not added to an old %s: %v", KarmadaSecret, err)
	}
	for k, v := range old.Data {
		if !bytes.Equal(s.Data[k], v) {
			t.Errorf("%s changed while adding the peer certificate", k)
		}
	}

	// Inside the last third of the certificates' year, an apply (unforced:
	// the addons are unchanged) renews them under the same CA and restarts
	// what mounts the Secret; the next apply leaves them.
	renewAt := now.Add(karmadaCertTTL - karmadaRenewBefore + time.Hour)
	a.Force = false
	a.Clock = testclock.NewFakePassiveClock(renewAt)
	// A fleet API StatefulSet made before the applier replaced the members
	// (RollingUpdate: its controller restarts them itself): with a member
	// not ready the certificates are renewed but the fleet API is not
	// restarted (the next apply does it, and makes it OnDelete).
	legacy := []byte(`{"spec":{"updateStrategy":{"type":"RollingUpdate"}}}`)
	if _, err := cp.Client.AppsV1().StatefulSets(addons.Namespace).Patch(ctx, KarmadaService, types.StrategicMergePatchType, legacy, metav1.PatchOptions{FieldManager: "before"}); err != nil {
		t.Fatal(err)
	}
	ready(2)
	if _, err := a.Apply(ctx, rendered); err == nil || !strings.Contains(err.Error(), "restart after renewing the certificates: the fleet's etcd has 2 of 3 members ready") {
		t.Fatalf("renewal with 2 of 3 members ready: %v, want the restart refused", err)
	}
	if sts, err := cp.Client.AppsV1().StatefulSets(addons.Namespace).Get(ctx, KarmadaService, metav1.GetOptions{}); err != nil || sts.Spec.Template.Annotations[KarmadaRenewedAnnotation] != "" {
		t.Fatalf("statefulset %s restarted with a member down: %v", KarmadaService, err)
	}
	ready(3)
	if _, err := a.Apply(ctx, rendered); err != nil {
		t.Fatal(err)
	}
	renewed, err := cp.Client.CoreV1().Secrets(addons.Namespace).Get(ctx, KarmadaSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{pki.CACert, pki.CAKey, pki.SAKey, pki.SAPub, pki.EtcdCACert, pki.EtcdCAKey} {
		if !bytes.Equal(renewed.Data[k], s.Data[k]) {
			t.Errorf("%s changed by the renewal", k)
		}
	}
	for _, k := range []string{pki.APIServerCert, pki.AdminCert, "webhook.crt", "aggregated.crt", pki.FrontProxyCert, pki.EtcdPeerCert, KarmadaKubeconfig, KarmadaLocalKubeconfig} {
		if bytes.Equal(renewed.Data[k], s.Data[k]) {
			t.Errorf("%s not renewed", k)
		}
	}
	if c, err := pki.ParseCerts(renewed.Data[pki.APIServerCert]); err != nil || !c[0].NotAfter.Equal(renewAt.Add(karmadaCertTTL)) {
		t.Errorf("renewed apiserver certificate: %v, want until %s", err, renewAt.Add(karmadaCertTTL))
	}
	if kc, err := clientcmd.Load(renewed.Data[KarmadaKubeconfig]); err != nil || !bytes.Equal(kc.AuthInfos[KarmadaAdmin].ClientCertificateData, renewed.Data[pki.AdminCert]) {
		t.Errorf("the kubeconfig does not carry the renewed admin certificate: %v", err)
	}
	stamp := renewAt.UTC().Format(time.RFC3339)
	for _, name := range []string{"karmada-webhook", "karmada-kube-controller-manager", "karmada-scheduler", "karmada-controller-manager"} {
		d, err := cp.Client.AppsV1().Deployments(addons.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Spec.Template.Annotations[KarmadaRenewedAnnotation]; got != stamp {
			t.Errorf("deployment %s: %s %q, want %q (restarted)", name, KarmadaRenewedAnnotation, got, stamp)
		}
	}
	sts, err := cp.Client.AppsV1().StatefulSets(addons.Namespace).Get(ctx, KarmadaService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := sts.Spec.Template.Annotations[KarmadaRenewedAnnotation]; got != stamp {
		t.Errorf("statefulset %s not restarted: %q", KarmadaService, got)
	}
	if renewed.Annotations[KarmadaRenewedAnnotation] != stamp {
		t.Errorf("secret %s: %s %q, want %q", KarmadaSecret, KarmadaRenewedAnnotation, renewed.Annotations[KarmadaRenewedAnnotation], stamp)
	}
	// A restart that did not happen (here: undone) is made by the next
	// apply, without renewing again.
	undo := []byte(`[{"op":"remove","path":"/spec/template/metadata/annotations/fleet.trellis.dev~1pki-renewed-at"}]`)
	if _, err := cp.Client.AppsV1().Deployments(addons.Namespace).Patch(ctx, "karmada-scheduler", types.JSONPatchType, undo, metav1.PatchOptions{FieldManager: renewFieldManager}); err != nil {
		t.Fatal(err)
	}
	a.Clock = testclock.NewFakePassiveClock(renewAt.Add(30 * time.Minute))
	if _, err := a.Apply(ctx, rendered); err != nil {
		t.Fatal(err)
	}
	if d, err := cp.Client.AppsV1().Deployments(addons.Namespace).Get(ctx, "karmada-scheduler", metav1.GetOptions{}); err != nil || d.Spec.Template.Annotations[KarmadaRenewedAnnotation] != stamp {
		t.Errorf("the missed restart of karmada-scheduler was not made: %v", err)
	}
	// The bundle's next apply keeps the restart annotation (another field
	// manager's) and the renewed certificates.
	a.Force = true
	a.Clock = testclock.NewFakePassiveClock(renewAt.Add(time.Hour))
	ready(3)
	if _, err := a.Apply(ctx, rendered); err != nil {
		t.Fatal(err)
	}
	if sts, err := cp.Client.AppsV1().StatefulSets(addons.Namespace).Get(ctx, KarmadaService, metav1.GetOptions{}); err != nil || sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Errorf("statefulset %s made before: %v, want OnDelete once the addon is applied", KarmadaService, err)
	}
	after, err := cp.Client.CoreV1().Secrets(addons.Namespace).Get(ctx, KarmadaSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after.Data[pki.AdminCert], renewed.Data[pki.AdminCert]) {
		t.Error("renewed again an hour later")
	}
	if sts, err := cp.Client.AppsV1().StatefulSets(addons.Namespace).Get(ctx, KarmadaService, metav1.GetOptions{}); err != nil || sts.Spec.Template.Annotations[KarmadaRenewedAnnotation] != stamp {
		t.Errorf("the bundle's apply dropped the restart annotation: %v", err)
	}

	// The definition asks for another number of etcd members than run:
	// refused before anything is written.
	def := load(t, "fleet-us-east-1")
	for i := range def.Addons {
		if def.Addons[i].Name == KarmadaAPIServerAddon {
			def.Addons[i].Values = map[string]any{"replicas": float64(1)}
		}
	}
	one, err := addons.Render(def, Lifecycle{})
	if err != nil {
		t.Fatal(err)
	}
	record, err := cp.Client.CoreV1().ConfigMaps(addons.Namespace).Get(ctx, addons.RecordConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.Clock = testclock.NewFakePassiveClock(renewAt.Add(karmadaCertTTL))
	_, err = a.Apply(ctx, one)
	if err == nil || !strings.Contains(err.Error(), "the fleet's etcd has 3 members") || !strings.Contains(err.Error(), "values.replicas to 3") {
		t.Fatalf("3 members -> 1: %v, want a refusal naming both and the value to set", err)
	}
	if sts, err := cp.Client.AppsV1().StatefulSets(addons.Namespace).Get(ctx, KarmadaService, metav1.GetOptions{}); err != nil || *sts.Spec.Replicas != 3 {
		t.Errorf("statefulset %s after the refusal: %v", KarmadaService, err)
	}
	if rec, err := cp.Client.CoreV1().ConfigMaps(addons.Namespace).Get(ctx, addons.RecordConfigMap, metav1.GetOptions{}); err != nil || rec.ResourceVersion != record.ResourceVersion {
		t.Errorf("the addon record was written by a refused apply: %v", err)
	}
	if sec, err := cp.Client.CoreV1().Secrets(addons.Namespace).Get(ctx, KarmadaSecret, metav1.GetOptions{}); err != nil || sec.ResourceVersion != after.ResourceVersion {
		t.Errorf("secret %s written by a refused apply (a year on, it would have renewed): %v", KarmadaSecret, err)
	}

	// The addon pruned (the StatefulSet gone) but its volume claims left:
	// the members they hold are the count to keep. Member 0's alone
	// refuses 3 (two new members would form a cluster of their own
	// beside it), in a diff as in an apply; all three take 3.
	if err := cp.Client.AppsV1().StatefulSets(addons.Namespace).Delete(ctx, KarmadaService, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := func(i int) {
		t.Helper()
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", karmadaEtcdVolume, KarmadaService, i), Namespace: addons.Namespace},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if _, err := cp.Client.CoreV1().PersistentVolumeClaims(addons.Namespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	claim(0)
	if _, err := a.Diff(ctx, rendered); err == nil || !strings.Contains(err.Error(), "volume claims of members [0] remain") {
		t.Errorf("diff of 3 members over member 0's volume: %v, want refused", err)
	}
	if _, err := a.Apply(ctx, rendered); err == nil || !strings.Contains(err.Error(), "values.replicas to 1") {
		t.Errorf("apply of 3 members over member 0's volume: %v, want refused", err)
	}
	if _, err := cp.Client.AppsV1().StatefulSets(addons.Namespace).Get(ctx, KarmadaService, metav1.GetOptions{}); err == nil {
		t.Error("the refused apply made the StatefulSet")
	}
	claim(1)
	claim(2)
	if _, err := a.Diff(ctx, rendered); err != nil {
		t.Errorf("diff of 3 members over their 3 volumes: %v", err)
	}
}

// The fleet addon's containers run with the Go memory limits the loopback
// fleet runs and the bench measured, and no others.
func TestKarmadaGoMemLimits(t *testing.T) {
	rendered, err := addons.Render(load(t, "fleet-us-east-1"), Lifecycle{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"karmada-apiserver/kube-apiserver":              karmada.GoMemLimits["kube-apiserver"],
		"karmada-controller-manager/controller-manager": karmada.GoMemLimits[karmada.ControllerManager],
	}
	got := map[string]string{}
	for _, r := range rendered {
		for _, o := range r.Objects {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				c := c.(map[string]any)
				env, _, _ := unstructured.NestedSlice(c, "env")
				for _, e := range env {
					if e := e.(map[string]any); e["name"] == "GOMEMLIMIT" {
						got[o.GetName()+"/"+c["name"].(string)] = e["value"].(string)
					}
				}
			}
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("the addon's GOMEMLIMITs %v, fleet/karmada's %v", got, want)
	}
}

// load is a cluster definition of clusters/.
func load(t *testing.T, name string) *definition.ClusterDefinition {
	t.Helper()
	l, err := definition.Load(filepath.Join("../../../clusters", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return l.ClusterDefinition
}
