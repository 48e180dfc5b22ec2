package quota

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

func TestFederate(t *testing.T) {
	q := func(cpu, mem string) map[corev1.ResourceName]resource.Quantity {
		return map[corev1.ResourceName]resource.Quantity{corev1.ResourceRequestsCPU: resource.MustParse(cpu), corev1.ResourceRequestsMemory: resource.MustParse(mem)}
	}
	plans := map[string]Plan{
		"east": {Quotas: map[string]map[corev1.ResourceName]resource.Quantity{"shop": q("4", "8Gi"), "east-only": q("1", "1Gi")}},
		"west": {Quotas: map[string]map[corev1.ResourceName]resource.Quantity{"shop": q("2500m", "4Gi")}},
	}
	fs := Federate(plans, 2)
	if len(fs) != 1 || fs[0].Namespace != "shop" {
		t.Fatalf("federated %v: want shop only (east-only runs in one member)", fs)
	}
	o := fs[0].Overall()
	if cpu, mem := o[corev1.ResourceRequestsCPU], o[corev1.ResourceRequestsMemory]; cpu.MilliValue() != 6500 || mem.Value() != 12<<30 {
		t.Errorf("overall cpu %s memory %s, want 6500m and 12Gi", cpu.String(), mem.String())
	}
	if got := Federate(plans, 1); len(got) != 2 {
		t.Errorf("minMembers 1: %d namespaces, want 2", len(got))
	}
	golden.AssertObjects(t, "testdata/federated.yaml", []map[string]any{fs[0].Object().Object})
}
