package inject

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
)

func template(containers ...corev1.Container) v1alpha1.PodTemplate {
	return v1alpha1.PodTemplate{Containers: containers}
}

func workload() Workload {
	return Workload{Kind: "TrellisService", Name: "web", Namespace: "ns", Service: "web", Ports: []v1alpha1.Port{{Name: "http", Port: 80}}}
}

func TestDefaultsResourcesOfEveryContainer(t *testing.T) {
	p := DefaultProfile()
	half := corev1.Container{Name: "half", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}
	pt, err := PodTemplate(p, workload(), template(corev1.Container{Name: "bare"}, half))
	if err != nil {
		t.Fatal(err)
	}
	all := append(append([]corev1.Container{}, pt.Spec.InitContainers...), pt.Spec.Containers...)
	if len(all) != 5 {
		t.Fatalf("want 3 injected + 2 user containers, got %d", len(all))
	}
	for _, c := range all {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[r]; !ok {
				t.Errorf("container %s has no %s request", c.Name, r)
			}
			if _, ok := c.Resources.Limits[r]; !ok {
				t.Errorf("container %s has no %s limit", c.Name, r)
			}
		}
	}
	// What the user set is kept.
	if got := pt.Spec.Containers[1].Resources.Requests[corev1.ResourceCPU]; got.String() != "2" {
		t.Errorf("user's cpu request overwritten: %s", got.String())
	}
}

func TestRequirePolicyNamesEveryGap(t *testing.T) {
	p := DefaultProfile()
	p.Resources.Policy = PolicyRequire
	_, err := PodTemplate(p, workload(), template(corev1.Container{Name: "bare"}))
	if !errors.Is(err, ErrResourcesRequired) {
		t.Fatalf("want ErrResourcesRequired, got %v", err)
	}
	for _, want := range []string{`container "bare"`, "requests.cpu", "limits.memory", "TrellisService ns/web"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestOptOut(t *testing.T) {
	w := workload()
	w.Runtime = v1alpha1.Runtime{Discovery: new(false), Identity: new(false)}
	pt, err := PodTemplate(DefaultProfile(), w, template(corev1.Container{Name: "app"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(pt.Spec.InitContainers) != 1 || pt.Spec.InitContainers[0].Name != wellknown.ContainerConfigInit {
		t.Errorf("opted out of discovery and identity, got init containers %v", pt.Spec.InitContainers)
	}
	if _, ok := pt.Annotations[wellknown.AnnotationDiscoveryService]; ok {
		t.Error("discovery annotations on a pod that opted out")
	}
}

func TestParseProfile(t *testing.T) {
	p, err := ParseProfile([]byte("revision: r7\nenv: prod\nresources:\n  policy: Require\n"))
	if err != nil || p.Revision != "r7" || p.Env != "prod" || p.Resources.Policy != PolicyRequire || p.Images.Traffic == "" {
		t.Fatalf("got %+v, %v", p, err)
	}
	for _, bad := range []string{"revision: r\nresources: {policy: Sometimes}\n", "revision: r\nimagez: {}\n", "env: prod\nrevision: \"\"\n"} {
		if _, err := ParseProfile([]byte(bad)); err == nil {
			t.Errorf("profile %q accepted", bad)
		}
	}
}

// TestReadinessGateOnlyWhereRegistered: a pod is Ready only once the
// registrar has registered it, for every workload that registers (ports
// and discovery on), and a workload that does not register (a Job or a
// training worker without ports, or discovery off) keeps the kubelet's
// own readiness.
func TestReadinessGateOnlyWhereRegistered(t *testing.T) {
	off := false
	noPorts := workload()
	noPorts.Kind, noPorts.Ports = "TrellisTrainingJob", nil
	discoveryOff := workload()
	discoveryOff.Runtime.Discovery = &off
	for _, tc := range []struct {
		name  string
		w     Workload
		gated bool
	}{
		{name: "registers", w: workload(), gated: true},
		{name: "no ports", w: noPorts},
		{name: "discovery off", w: discoveryOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pt, err := PodTemplate(DefaultProfile(), tc.w, template(corev1.Container{Name: "app"}))
			if err != nil {
				t.Fatal(err)
			}
			want := []corev1.PodReadinessGate(nil)
			if tc.gated {
				want = []corev1.PodReadinessGate{{ConditionType: wellknown.ConditionRegistered}}
			}
			if got := pt.Spec.ReadinessGates; len(got) != len(want) || (len(want) == 1 && got[0] != want[0]) {
				t.Errorf("readiness gates %v, want %v", got, want)
			}
		})
	}
}
