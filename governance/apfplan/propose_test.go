package apfplan

import (
	"math"
	"slices"
	"testing"

	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

// Kubernetes' default levels with the addon's trellis-tenants, on an
// apiserver with 600 seats (--max-requests-inflight 400 and mutating 200).
func defaults() Capacity {
	return Capacity{ServerSeats: 600, Shares: map[string]int32{
		"catch-all": 5, "global-default": 20, "leader-election": 10, "node-high": 40, "system": 30,
		"workload-high": 40, "workload-low": 100, TenantsLevel: 30,
	}}
}

func TestProposeDedicatesTheTenantThatOutgrowsTheSharedLevel(t *testing.T) {
	c := defaults()
	if got := c.Seats(TenantsLevel); got != 66 { // 600 x 30/275
		t.Fatalf("shared level %v seats today, want 66", got)
	}
	p := Propose(c, []Demand{
		{Namespace: "team-grow", Recent: 25, Forecast: 48, Requests: map[Class]Rate{ // > 66/2: its own level
			Mutating: {Recent: 120, Forecast: 210.5}, Read: {Recent: 30, Forecast: 41}, Watch: {Recent: 2, Forecast: 2.4},
		}},
		{Namespace: "team-a", Recent: 6, Forecast: 8, Requests: map[Class]Rate{
			Mutating: {Recent: 4, Forecast: 5.1}, Read: {Recent: 12, Forecast: 14}, Watch: {Recent: 0.3, Forecast: 0.4},
		}},
		{Namespace: "team-b", Recent: 3, Forecast: 4},
	}, Options{})
	if !p.Fits || len(p.Levels) != 2 {
		t.Fatalf("proposal %s", p)
	}
	shared, grow := p.Levels[0], p.Levels[1]
	if shared.Name != TenantsLevel || grow.Name != Prefix+"team-grow" || len(grow.Tenants) != 1 || len(shared.Tenants) != 2 {
		t.Fatalf("levels %+v", p.Levels)
	}
	for _, l := range p.Levels {
		if l.Seats < l.Need {
			t.Errorf("%s: %v seats for a need of %v", l.Name, l.Seats, l.Need)
		}
	}
	if shared.Shares < 30 {
		t.Errorf("the shared level shrank to %d shares", shared.Shares)
	}
	if math.Abs(grow.Need-48*1.2) > 1e-9 {
		t.Errorf("team-grow needs %v seats, want its forecast plus 20%%", grow.Need)
	}
	levels, schemas := p.Objects()
	if len(schemas) != 3*len(Classes) {
		t.Errorf("%d flow schemas for 3 tenants, want one per tenant and class", len(schemas))
	}
	for _, fs := range schemas {
		ns, c, _ := ParseSchema(fs.Name)
		want := TenantsLevel
		if ns == "team-grow" {
			want = grow.Name
		}
		if r := fs.Spec.Rules[0].ResourceRules[0]; fs.Spec.PriorityLevelConfiguration.Name != want || !slices.Equal(r.Verbs, c.Verbs()) || !slices.Equal(r.Namespaces, []string{ns}) {
			t.Errorf("%s: level %s, rule %+v; want level %s, the %s verbs in %s", fs.Name, fs.Spec.PriorityLevelConfiguration.Name, r, want, c, ns)
		}
	}
	golden.AssertObjects(t, "testdata/proposal.yaml", append(levels, anys(schemas)...))
	golden.Assert(t, "testdata/proposal.txt", []byte(p.String()))
}

func TestProposeReportsWhatDoesNotFit(t *testing.T) {
	p := Propose(defaults(), []Demand{{Namespace: "huge", Forecast: 700}}, Options{})
	if p.Fits {
		t.Fatalf("700 seats fit in 600: %s", p)
	}
}

func anys[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}
