package apfplan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
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

// Many tenants above an equal share of the shared level crowd its queues:
// the proposal doubles them until a steady tenant's hand is all heavy
// flows' queues with chance at most 0.001, and says so when the most the
// apiserver takes for the hand (1,024 for 6) are not enough.
func TestProposeSizesTheSharedQueues(t *testing.T) {
	demands := func(heavy, steady int) []Demand {
		var ds []Demand
		for i := range heavy {
			ds = append(ds, Demand{Namespace: fmt.Sprintf("heavy-%02d", i), Recent: 1, Forecast: 6})
		}
		for i := range steady {
			ds = append(ds, Demand{Namespace: fmt.Sprintf("steady-%02d", i), Recent: 0.1, Forecast: 0.1})
		}
		return ds
	}
	for _, c := range []struct {
		heavy   int
		queues  int32
		crowded bool
	}{{0, 128, false}, {2, 128, false}, {10, 256, false}, {30, 512, false}, {90, 1024, true}} {
		p := Propose(defaults(), demands(c.heavy, 30), Options{})
		shared := p.Levels[0]
		t.Logf("%d heavy: %s", c.heavy, strings.SplitN(p.String(), "\n", 2)[0])
		if len(p.Levels) != 1 || shared.Heavy != c.heavy || shared.Queues != c.queues || shared.HandSize != AddonHandSize || shared.Crowded != c.crowded {
			t.Errorf("%d heavy tenants: %d levels, shared %+v; want one level, %d heavy, %d queues of hand %d, crowded %v", c.heavy, len(p.Levels), shared, c.heavy, c.queues, AddonHandSize, c.crowded)
		}
		if !c.crowded && shared.Crowding > 0.001 {
			t.Errorf("%d heavy tenants: crowding %.4f with %d queues, want at most 0.001", c.heavy, shared.Crowding, shared.Queues)
		}
		levels, _ := p.Objects()
		if bits := entropyBits(shared.Queues, shared.HandSize); bits > 60 {
			t.Errorf("%d heavy tenants: %d queues of hand %d need %d bits, more than the apiserver's 60", c.heavy, shared.Queues, shared.HandSize, bits)
		}
		_, hasQueues := levels[0].(map[string]any)["spec"].(map[string]any)["limited"].(map[string]any)["limitResponse"]
		if !hasQueues {
			t.Errorf("%d heavy tenants: the shared level's object leaves its queues out; an apply must keep sending them", c.heavy)
		}
	}
}

// A hand of 8 (Kubernetes' default) takes at most 181 queues: doubling 64
// stops at 128 (8·log2(256) is over APF's 60 bits), and the proposal says
// the level is crowded.
func TestProposeKeepsQueuesTheApiserverTakes(t *testing.T) {
	c := defaults()
	c.Queues, c.HandSize = 64, 8
	var ds []Demand
	for i := range 30 {
		ds = append(ds, Demand{Namespace: fmt.Sprintf("heavy-%02d", i), Recent: 1, Forecast: 6},
			Demand{Namespace: fmt.Sprintf("steady-%02d", i), Recent: 0.1, Forecast: 0.1})
	}
	p := Propose(c, ds, Options{})
	if l := p.Levels[0]; l.Queues != 128 || l.HandSize != 8 || !l.Crowded || !strings.Contains(p.String(), "crowd the shared level's 128 queues") {
		t.Errorf("hand 8: %d queues, hand %d, crowded %v; want 128 queues, crowded", l.Queues, l.HandSize, l.Crowded)
	}
}

// A heavy tenant's verb classes are flows of their own; a level that
// rejects instead of queuing is left as it is.
func TestProposeCountsFlowsAndLeavesRejectingLevels(t *testing.T) {
	ds := []Demand{{Namespace: "busy", Recent: 1, Forecast: 6, Requests: map[Class]Rate{
		Mutating: {Recent: 10, Forecast: 20}, Read: {Recent: 5, Forecast: 6}, Watch: {Recent: 1, Forecast: 1},
	}}}
	for i := range 10 {
		ds = append(ds, Demand{Namespace: fmt.Sprintf("steady-%02d", i), Recent: 0.1, Forecast: 0.1})
	}
	if l := Propose(defaults(), ds, Options{}).Levels[0]; l.Heavy != 3 {
		t.Errorf("one heavy tenant with three classes of requests: %d heavy flows, want 3", l.Heavy)
	}
	c := defaults()
	c.SharedRejects = true
	p := Propose(c, ds, Options{})
	levels, _ := p.Objects()
	if _, ok := levels[0].(map[string]any)["spec"].(map[string]any)["limited"].(map[string]any)["limitResponse"]; ok || p.Levels[0].Queues != 0 {
		t.Errorf("a rejecting shared level: %d queues proposed, limitResponse written %v; want neither", p.Levels[0].Queues, ok)
	}
}

// crowding matches shuffle sharding drawn at random: heavy flows' hands,
// then a steady flow's, all of h distinct queues.
func TestCrowdingMatchesShuffleSharding(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	const hand, draws = 6, 40000
	deal := func(queues []int) []int { // a partial Fisher-Yates shuffle
		for i := range hand {
			j := i + r.IntN(len(queues)-i)
			queues[i], queues[j] = queues[j], queues[i]
		}
		return queues[:hand]
	}
	for _, c := range []struct{ heavy, queues int }{{10, 128}, {15, 128}, {30, 256}} {
		deck := make([]int, c.queues)
		for i := range deck {
			deck[i] = i
		}
		crowded := 0
		held := make([]int, c.queues)
		for d := 1; d <= draws; d++ {
			for range c.heavy {
				for _, q := range deal(deck) {
					held[q] = d
				}
			}
			all := true
			for _, q := range deal(deck) {
				all = all && held[q] == d
			}
			if all {
				crowded++
			}
		}
		got, want := float64(crowded)/draws, crowding(c.heavy, hand, c.queues)
		t.Logf("%d heavy flows, %d queues: %.5f of hands crowded, crowding %.5f", c.heavy, c.queues, got, want)
		if tol := 4*math.Sqrt(want/draws) + 0.2*want; math.Abs(got-want) > tol {
			t.Errorf("%d heavy flows, %d queues: %.5f of hands crowded, want crowding's %.5f±%.5f", c.heavy, c.queues, got, want, tol)
		}
	}
}
