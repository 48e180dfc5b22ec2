package gateway

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/gateway/api"
)

func TestProvenance(t *testing.T) {
	const d = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	p := &Policy{Registries: []string{"registry.example.com", "ghcr.io/acme", "docker.io/library"}}
	for _, tc := range []struct {
		image string
		want  []string // substrings of the problems, none when empty
	}{
		{"registry.example.com/web" + d, nil},
		{"ghcr.io/acme/web" + d, nil},
		{"nginx" + d, nil}, // docker.io/library/nginx
		{"ghcr.io/acmecorp/web" + d, []string{"registry ghcr.io, which is not allowed"}},
		{"registry.example.com/web:1.0", []string{"not pinned by digest"}},
		{"quay.io/x:latest", []string{"not pinned by digest", "registry quay.io"}},
		{"registry.example.com.evil.io/web" + d, []string{"not allowed"}},
	} {
		raw := map[string]any{"spec": map[string]any{"template": map[string]any{"containers": []any{
			map[string]any{"name": "side", "image": "registry.example.com/side" + d},
			map[string]any{"name": "web", "image": tc.image},
		}}}}
		probs := checkProvenance(raw, p)
		if len(probs) != len(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.image, probs, tc.want)
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(probs[i].Message, w) || probs[i].Field != "spec.template.containers[1].image" {
				t.Errorf("%s: problem %d = %+v, want %q at spec.template.containers[1].image", tc.image, i, probs[i], w)
			}
		}
	}
	if probs := checkProvenance(map[string]any{"spec": map[string]any{"template": map[string]any{"containers": []any{map[string]any{"image": "a.io/b" + d}}}}}, &Policy{}); len(probs) != 1 || !strings.Contains(probs[0].Message, "allows none yet") {
		t.Errorf("no policy: %v", probs)
	}
}

func TestSignature(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	body := []byte(goodService)
	sig, err := api.Sign(body, "ci", priv)
	if err != nil {
		t.Fatal(err)
	}
	canon, _ := api.Canonical(body)
	p := &Policy{RequireSignature: true, Signers: map[string]ed25519.PublicKey{"ci": pub}}
	if _, probs := checkSignature(canon, sig, p); probs != nil {
		t.Errorf("good signature refused: %v", probs)
	}
	changed, _ := api.Canonical([]byte(strings.Replace(goodService, "web", "wob", 1)))
	for name, tc := range map[string]struct {
		canon []byte
		sig   string
		want  string
	}{
		"unsigned":    {canon, "", "requires a signed workload"},
		"changed":     {changed, sig, "does not match"},
		"unknown key": {canon, "other:" + strings.SplitN(sig, ":", 2)[1], `signer "other"`},
		"not base64":  {canon, "ci:!!", "not base64"},
		"no key name": {canon, "abc", "want <key name>"},
	} {
		if _, probs := checkSignature(tc.canon, tc.sig, p); len(probs) != 1 || !strings.Contains(probs[0].Message, tc.want) {
			t.Errorf("%s: %v, want %q", name, probs, tc.want)
		}
	}
	if skipped, probs := checkSignature(canon, "", &Policy{}); !skipped || probs != nil {
		t.Errorf("optional and unsigned: skipped=%v %v", skipped, probs)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: PolicyConfigMap}, Data: map[string]string{PolicyKeySignerPrefix + "ci": base64.StdEncoding.EncodeToString(pub), PolicyKeyRequireSignature: "true"}}
	if pol, err := ParsePolicy(cm); err != nil || !pol.RequireSignature || len(pol.Signers) != 1 {
		t.Errorf("ParsePolicy: %+v %v", pol, err)
	}
	cm.Data[PolicyKeySignerPrefix+"bad"] = "short"
	if _, err := ParsePolicy(cm); err == nil {
		t.Errorf("a bad public key was accepted")
	}
}

func deployment(replicas int32, cpu string) *appsv1.Deployment {
	return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
	}}}}
}

func TestQuota(t *testing.T) {
	rq := corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "compute"},
		Spec:   corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourcePods: resource.MustParse("100")}},
		Status: corev1.ResourceQuotaStatus{Used: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("12"), corev1.ResourcePods: resource.MustParse("12")}}}
	newD := Demand([]client.Object{deployment(7, "1")})
	probs := checkQuota([]corev1.ResourceQuota{rq}, newD, nil)
	if len(probs) != 1 || probs[0].Message != "needs 3 CPU more than team-a/compute allows: 12 of 16 used" {
		t.Errorf("new workload: %v", probs)
	}
	// A changed workload is charged only its growth: 4 -> 7 CPUs needs 3,
	// which fits in 4 left... 12 used include the running 4.
	if probs := checkQuota([]corev1.ResourceQuota{rq}, newD, Demand([]client.Object{deployment(4, "1")})); len(probs) != 0 {
		t.Errorf("growth of 3 CPUs within 4 left: %v", probs)
	}
	if probs := checkQuota([]corev1.ResourceQuota{rq}, Demand([]client.Object{deployment(9, "500m")}), nil); len(probs) != 1 || !strings.HasPrefix(probs[0].Message, "needs 500m CPU more") {
		t.Errorf("fractional: %v", probs)
	}
}
