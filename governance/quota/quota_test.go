package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

func TestMakePlan(t *testing.T) {
	t.Parallel()
	q := resource.MustParse
	samples := []Sample{
		{Namespace: "a", Usage: map[corev1.ResourceName]resource.Quantity{corev1.ResourceRequestsCPU: q("2"), corev1.ResourcePods: q("20"), corev1.ResourceRequestsMemory: q("1Gi")}},
		{Namespace: "a", Usage: map[corev1.ResourceName]resource.Quantity{corev1.ResourceRequestsCPU: q("3500m"), corev1.ResourcePods: q("12"), corev1.ResourceRequestsMemory: q("3Gi")}},
		{Namespace: "quiet", Usage: map[corev1.ResourceName]resource.Quantity{corev1.ResourcePods: q("1")}},
		{Namespace: "kube-system", Usage: map[corev1.ResourceName]resource.Quantity{corev1.ResourcePods: q("100")}},
	}
	p := MakePlan(samples, 0.2, map[string]bool{"kube-system": true})
	a := p.Quotas["a"]
	for r, want := range map[corev1.ResourceName]string{
		corev1.ResourceRequestsCPU:    "4200m",  // 3.5 x 1.2
		corev1.ResourcePods:           "24",     // 20 x 1.2
		corev1.ResourceRequestsMemory: "3712Mi", // 3 GiB x 1.2 = 3686.4 Mi, up to 64 Mi
	} {
		if got := a[r]; got.Cmp(q(want)) != 0 {
			t.Errorf("a %s = %s, want %s", r, got.String(), want)
		}
	}
	if got := p.Quotas["quiet"][corev1.ResourcePods]; got.Cmp(q("10")) != 0 {
		t.Errorf("quiet pods = %s, want the minimum 10", got.String())
	}
	if _, ok := p.Quotas["kube-system"]; ok {
		t.Error("a skipped namespace got a quota")
	}
}

func TestBusinessHours(t *testing.T) {
	t.Parallel()
	h := BusinessHours(time.UTC)
	for s, want := range map[string]bool{
		"2026-11-23T10:00:00Z": true,  // Monday
		"2026-11-23T08:59:00Z": false, // before 9
		"2026-11-23T17:00:00Z": false, // after 17
		"2026-11-22T12:00:00Z": false, // Sunday
	} {
		tm, _ := time.Parse(time.RFC3339, s)
		if h.Open(tm) != want {
			t.Errorf("Open(%s) = %v, want %v", s, !want, want)
		}
	}
}

func TestStoreRetention(t *testing.T) {
	t.Parallel()
	s := Store{Path: filepath.Join(t.TempDir(), "samples.jsonl"), Retention: 24 * time.Hour}
	now := time.Now()
	if err := s.Append([]Sample{{Time: now.Add(-48 * time.Hour), Namespace: "old"}, {Time: now, Namespace: "new"}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(now)
	if err != nil || len(got) != 1 || got[0].Namespace != "new" {
		t.Fatalf("Load: %v %v", got, err)
	}
}

// TestIntegrationQuota samples real usage, plans, applies, and sees the
// apiserver enforce the quota; past 80% the watch alerts a webhook in
// business hours only.
func TestIntegrationQuota(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{ControllerManager: true})
	ctx := context.Background()
	c := cp.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func(i int) error {
		res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
		_, err := c.CoreV1().Pods("team-a").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}}}}, metav1.CreateOptions{})
		return err
	}
	store := Store{Path: filepath.Join(t.TempDir(), "samples.jsonl")}
	for i := range 12 {
		if err := pod(i); err != nil {
			t.Fatal(err)
		}
		if i == 5 || i == 11 { // two samples: 6 pods, then the peak of 12
			s, _, err := Collect(ctx, c, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Append(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	samples, err := store.Load(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	plan := MakePlan(samples, 0.2, map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true, "default": true})
	a := plan.Quotas["team-a"]
	if got := a[corev1.ResourcePods]; got.Cmp(resource.MustParse("15")) != 0 { // ceil(12 x 1.2)
		t.Fatalf("planned pods %s, want 15", got.String())
	}
	if got := a[corev1.ResourceRequestsCPU]; got.Cmp(resource.MustParse("1500m")) != 0 { // 1.2 cores x 1.2 = 1.44, up to 1.5
		t.Fatalf("planned requests.cpu %s, want 1500m", got.String())
	}
	if ns, err := Apply(ctx, c, plan, time.Now()); err != nil || len(ns) != 1 {
		t.Fatalf("Apply: %v %v", ns, err)
	}
	// The quota controller fills in usage; then admission enforces it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		rq, err := c.CoreV1().ResourceQuotas("team-a").Get(ctx, Name, metav1.GetOptions{})
		if err == nil && rq.Status.Used != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("quota status never computed")
		}
		time.Sleep(200 * time.Millisecond)
	}
	n := 12
	for ; n < 15; n++ {
		if err := pod(n); err != nil {
			t.Fatalf("pod %d within the quota refused: %v", n, err)
		}
	}
	if err := pod(n); err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("pod 16 of a 15-pod quota: %v, want exceeded quota", err)
	}

	var mu sync.Mutex
	var got []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
	}))
	defer hook.Close()
	monday, _ := time.Parse(time.RFC3339, "2026-11-23T10:00:00Z")
	sunday, _ := time.Parse(time.RFC3339, "2026-11-22T10:00:00Z")
	for {
		res, err := Watch(ctx, c, WatchConfig{Threshold: 0.8, Webhook: hook.URL, Hours: BusinessHours(time.UTC)}, sunday)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Alerts) > 0 {
			if res.Sent {
				t.Fatal("an alert was sent on a Sunday")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no alert at 15 of 15 pods")
		}
		time.Sleep(200 * time.Millisecond)
	}
	res, err := Watch(ctx, c, WatchConfig{Threshold: 0.8, Webhook: hook.URL, Hours: BusinessHours(time.UTC)}, monday)
	if err != nil || !res.Sent {
		t.Fatalf("Monday 10:00: sent=%v err=%v", res.Sent, err)
	}
	alerts := res.Alerts
	mu.Lock()
	defer mu.Unlock()
	var body struct{ Alerts []Alert }
	if len(got) != 1 || json.Unmarshal([]byte(got[0]), &body) != nil || len(body.Alerts) != len(alerts) {
		t.Fatalf("webhook got %q", got)
	}
	found := false
	for _, a := range body.Alerts {
		found = found || (a.Namespace == "team-a" && a.Resource == "pods" && a.Percent >= 100)
	}
	if !found {
		t.Errorf("alerts %+v lack team-a pods at 100%%", body.Alerts)
	}
}

// TestPlanRoundTrip: a plan printed as YAML (what people review) applies
// as printed.
func TestPlanRoundTrip(t *testing.T) {
	t.Parallel()
	p := MakePlan([]Sample{{Namespace: "a", Usage: map[corev1.ResourceName]resource.Quantity{corev1.ResourceRequestsCPU: resource.MustParse("2")}}}, 0.2, nil)
	b, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back Plan
	if err := yaml.UnmarshalStrict(b, &back); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	for r, q := range p.Quotas["a"] {
		if got := back.Quotas["a"][r]; got.Cmp(q) != 0 {
			t.Errorf("%s: %s after the round trip, want %s", r, got.String(), q.String())
		}
	}
}

// TestIntegrationCollectWithoutSecrets samples as the local cluster's
// sampler does, with the RBAC the kind addons give it (read from the
// rendered local cluster, clusters/expected/local.addons.yaml): it may not
// list secrets, so count/secrets is left out of every sample and said to
// be, while every other count and the pods' usage are recorded.
func TestIntegrationCollectWithoutSecrets(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	ctx := context.Background()
	c := cp.Client
	b, err := os.ReadFile("../../clusters/expected/local.addons.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var m metav1.TypeMeta
		var o metav1.PartialObjectMetadata
		if yaml.Unmarshal([]byte(doc), &m) != nil || yaml.Unmarshal([]byte(doc), &o) != nil || o.Name != "trellis-quota-sample" {
			continue
		}
		switch m.Kind {
		case "ClusterRole":
			err = yaml.Unmarshal([]byte(doc), &role)
		case "ClusterRoleBinding":
			err = yaml.Unmarshal([]byte(doc), &binding)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(role.Rules) == 0 || len(binding.Subjects) != 1 {
		t.Fatalf("the local cluster's addons have no trellis-quota-sample ClusterRole and binding")
	}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := c.CoreV1().ConfigMaps("team-a").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CoreV1().Secrets("team-a").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sa := binding.Subjects[0]
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + sa.Namespace + ":" + sa.Name}
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	samples, skipped, err := Collect(ctx, as, time.Now())
	if err != nil {
		t.Fatalf("collect as %s: %v", cfg.Impersonate.UserName, err)
	}
	if len(skipped) != 1 || skipped[0] != "count/secrets" {
		t.Errorf("skipped %v, want [count/secrets]", skipped)
	}
	var teamA *Sample
	for i := range samples {
		if samples[i].Namespace == "team-a" {
			teamA = &samples[i]
		}
		if _, ok := samples[i].Usage["count/secrets"]; ok {
			t.Errorf("%s's sample records count/secrets, which the sampler may not list", samples[i].Namespace)
		}
	}
	if teamA == nil {
		t.Fatalf("no sample of team-a among %d", len(samples))
	}
	// team-a's two, and the root CA ConfigMap every namespace gets (when
	// the controller-manager runs; none here).
	if got := teamA.Usage["count/configmaps"]; got.Value() < 2 {
		t.Errorf("team-a's count/configmaps = %s, want at least 2", got.String())
	}
	if _, ok := teamA.Usage[corev1.ResourcePods]; !ok {
		t.Errorf("team-a's sample lacks pods")
	}
}
