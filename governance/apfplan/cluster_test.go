package apfplan

import (
	"context"
	"slices"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestApplyReplacesATenantsUnsplitSchema(t *testing.T) {
	schema := func(name string, labels map[string]string) *flowcontrolv1.FlowSchema {
		return &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	c := fake.NewClientset(
		// The schemas of the plan before the split, and of a namespace no
		// longer planned: Trellis quota's, gone after the apply.
		schema("trellis-tenant-team-a", ManagedBy),
		schema("trellis-tenant-team-gone", ManagedBy),
		// Not Trellis quota's, whatever the name: kept.
		schema("trellis-tenant-team-b", nil),
		schema("trellis-tenants", map[string]string{"app.kubernetes.io/managed-by": "trellis-addons"}),
	)
	p := Propose(defaults(), []Demand{{Namespace: "team-a", Forecast: 2}}, Options{})
	if err := Apply(context.Background(), c, p); err != nil {
		t.Fatal(err)
	}
	l, err := c.FlowcontrolV1().FlowSchemas().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fs := range l.Items {
		got = append(got, fs.Name)
	}
	slices.Sort(got)
	want := []string{"trellis-tenant-team-a.mutating", "trellis-tenant-team-a.read", "trellis-tenant-team-a.watch", "trellis-tenant-team-b", "trellis-tenants"}
	if !slices.Equal(got, want) {
		t.Errorf("flow schemas after the apply %v, want %v", got, want)
	}
}

// A tenant back in the shared level: its dedicated level goes, unless a
// FlowSchema that is not Trellis quota's still points at one.
func TestApplyDeletesLevelsNoLongerProposed(t *testing.T) {
	level := func(name string, labels map[string]string) *flowcontrolv1.PriorityLevelConfiguration {
		return &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	c := fake.NewClientset(
		level("trellis-tenant-team-a", ManagedBy),
		level("trellis-tenant-team-b", ManagedBy),
		level("trellis-tenant-team-c", nil),
		&flowcontrolv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"},
			Spec:       flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "trellis-tenant-team-b"}},
		},
	)
	p := Propose(defaults(), []Demand{{Namespace: "team-a", Forecast: 2}}, Options{})
	if err := Apply(context.Background(), c, p); err != nil {
		t.Fatal(err)
	}
	l, err := c.FlowcontrolV1().PriorityLevelConfigurations().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, pl := range l.Items {
		got = append(got, pl.Name)
	}
	slices.Sort(got)
	want := []string{"trellis-tenant-team-b", "trellis-tenant-team-c", "trellis-tenants"}
	if !slices.Equal(got, want) {
		t.Errorf("priority levels after the apply %v, want %v", got, want)
	}
}

// A proposal without tenants deletes nothing: it knows of no tenant, so
// it cannot tell which are gone.
func TestApplyWithoutTenantsPrunesNothing(t *testing.T) {
	c := fake.NewClientset(
		&flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "trellis-tenant-team-a.mutating", Labels: ManagedBy},
			Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "trellis-tenant-team-a"}}},
		&flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "trellis-tenant-team-a", Labels: ManagedBy}},
	)
	if err := Apply(context.Background(), c, Propose(defaults(), nil, Options{})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FlowcontrolV1().FlowSchemas().Get(context.Background(), "trellis-tenant-team-a.mutating", metav1.GetOptions{}); err != nil {
		t.Errorf("team-a's schema after a proposal without tenants: %v", err)
	}
	if _, err := c.FlowcontrolV1().PriorityLevelConfigurations().Get(context.Background(), "trellis-tenant-team-a", metav1.GetOptions{}); err != nil {
		t.Errorf("team-a's level after a proposal without tenants: %v", err)
	}
}
