// Package apfplan proposes API capacity from forecasts: how API Priority and
// Fairness should share the apiserver's seats among tenants so that the
// forecast peak of the busiest tenants fits without queueing the others.
//
// The apiserver's metrics carry a flow schema, never a namespace, so every
// tenant namespace gets FlowSchemas of its own, one per verb class
// (`trellis-tenant-<ns>.mutating`, `.read`, `.watch`): in the shared
// trellis-tenants priority level, with fair queuing by namespace as before,
// unless its forecast needs a level of its own. Its seats
// (apiserver_flowcontrol_current_executing_seats, plus its requests in
// queue, summed over its schemas) are then its history and the next plan's
// input; its requests per class
// (apiserver_flowcontrol_dispatched_requests_total) are forecast beside
// them.
package apfplan

import (
	"cmp"
	"fmt"
	"math"
	"sort"
)

// TenantsLevel is the shared priority level of the trellis-flowcontrol
// addon.
const TenantsLevel = "trellis-tenants"

// Prefix of the per-tenant FlowSchemas and priority levels.
const Prefix = "trellis-tenant-"

// Capacity is how the apiserver's seats are shared today.
type Capacity struct {
	// ServerSeats is APF's total: --max-requests-inflight plus
	// --max-mutating-requests-inflight.
	ServerSeats int `json:"serverSeats"`
	// Shares are the nominalConcurrencyShares of every Limited priority
	// level, by name.
	Shares map[string]int32 `json:"shares"`
	// Queues and HandSize are the shared level's queuing (0: the addon's,
	// AddonQueues and AddonHandSize); SharedRejects: the shared level
	// rejects instead of queuing, and the proposal leaves that be.
	Queues        int32 `json:"queues,omitempty"`
	HandSize      int32 `json:"handSize,omitempty"`
	SharedRejects bool  `json:"sharedRejects,omitempty"`
}

// AddonQueues and AddonHandSize are the trellis-flowcontrol addon's
// queuing for the shared level.
const (
	AddonQueues   = 128
	AddonHandSize = 6
)

// Seats is a level's nominal seats: the server's seats times its share of
// all shares (APF rounds up).
func (c Capacity) Seats(level string) float64 {
	var sum int32
	for _, s := range c.Shares {
		sum += s
	}
	if sum == 0 {
		return 0
	}
	return math.Ceil(float64(c.ServerSeats) * float64(c.Shares[level]) / float64(sum))
}

// Demand is one tenant's seats: its recent peak and the forecast's upper
// bound of its peak over the horizon; and the same of its request rates by
// verb class.
type Demand struct {
	Namespace string  `json:"namespace"`
	Recent    float64 `json:"recentSeats"`
	Forecast  float64 `json:"forecastSeats"`
	// Requests are its requests per second by class, where its schemas
	// have history.
	Requests map[Class]Rate `json:"requests,omitempty"`
}

// Options tune a proposal; zero fields take the defaults.
type Options struct {
	// Headroom over the forecast seats each level is sized for (0.2).
	Headroom float64
	// DedicateAbove gives a tenant its own level when its forecast needs
	// more than this fraction of the shared level's seats (0.5): fair
	// queuing shares a level's seats among the flows that want them, so a
	// tenant that would fill half of it on its own is a tenant the others
	// wait behind at its peak.
	DedicateAbove float64
	// MaxCrowding is the largest chance a steady tenant of the shared
	// level may have of every queue of its hand being one a heavy
	// tenant's requests wait in (0.001; see queuesFor).
	MaxCrowding float64
}

// Level is a proposed priority level's size.
type Level struct {
	Name   string  `json:"name"`
	Shares int32   `json:"shares"`
	Seats  float64 `json:"seats"`
	Need   float64 `json:"needSeats"`
	// Tenants are the namespaces whose FlowSchemas point at it.
	Tenants []string `json:"tenants"`
	// The shared level's queuing: its queues, its hand size, how many
	// flows its heavy tenants bring (see queuesFor), and the chance that a
	// steady tenant's hand is all their queues.
	Queues   int32   `json:"queues,omitempty"`
	HandSize int32   `json:"handSize,omitempty"`
	Heavy    int     `json:"heavyFlows,omitempty"`
	Crowding float64 `json:"crowding,omitempty"`
	// Crowded: the most queues APF takes for the hand size leave Crowding
	// above Options.MaxCrowding.
	Crowded bool `json:"crowded,omitempty"`
}

// Proposal is the API capacity to review and apply.
type Proposal struct {
	Capacity Capacity `json:"capacity"`
	Demands  []Demand `json:"demands"`
	// Levels are the shared level and the dedicated ones, with their new
	// shares and the seats those give.
	Levels []Level `json:"levels"`
	// Fits is false when the forecast needs more seats than the server
	// has: raise --max-requests-inflight or add apiservers.
	Fits bool `json:"fits"`
}

// Propose sizes the shared level for the tenants that stay in it and a
// level for each tenant that needs one, so that every level's nominal
// seats hold its forecast plus headroom; the other levels keep their
// shares. The shared level never shrinks below its shares today.
func Propose(c Capacity, demands []Demand, o Options) Proposal {
	if o.Headroom == 0 {
		o.Headroom = 0.2
	}
	if o.DedicateAbove == 0 {
		o.DedicateAbove = 0.5
	}
	if o.MaxCrowding == 0 {
		o.MaxCrowding = 0.001
	}
	ds := append([]Demand(nil), demands...)
	sort.Slice(ds, func(i, j int) bool {
		if ds[i].Forecast != ds[j].Forecast {
			return ds[i].Forecast > ds[j].Forecast
		}
		return ds[i].Namespace < ds[j].Namespace
	})
	shared := Level{Name: TenantsLevel}
	var dedicated []Level
	sharedSeats := c.Seats(TenantsLevel)
	for _, d := range ds {
		if d.Forecast > o.DedicateAbove*sharedSeats {
			dedicated = append(dedicated, Level{Name: Prefix + d.Namespace, Need: d.Forecast * (1 + o.Headroom), Tenants: []string{d.Namespace}})
			continue
		}
		shared.Need += d.Forecast * (1 + o.Headroom)
		shared.Tenants = append(shared.Tenants, d.Namespace)
	}
	// Every level's shares s = r·Σ, where r is its need over the server's
	// seats and Σ the sum of all shares, its own included: a fixed point,
	// reached by iterating from today's shares when the needs fit (Σr < 1).
	levels := append([]Level{shared}, dedicated...)
	var r float64
	for _, l := range levels {
		r += l.Need / float64(c.ServerSeats)
	}
	p := Proposal{Capacity: c, Demands: ds, Fits: r < 0.9}
	next := Capacity{ServerSeats: c.ServerSeats, Shares: map[string]int32{}}
	for name, s := range c.Shares {
		next.Shares[name] = s
	}
	for range 100 {
		var sum int32
		for _, s := range next.Shares {
			sum += s
		}
		changed := false
		for i := range levels {
			s := max(int32(math.Ceil(levels[i].Need/float64(c.ServerSeats)*float64(sum))), 1)
			if levels[i].Name == TenantsLevel {
				s = max(s, c.Shares[TenantsLevel])
			}
			if next.Shares[levels[i].Name] != s {
				next.Shares[levels[i].Name], changed = s, true
			}
		}
		if !changed || !p.Fits {
			break
		}
	}
	for i := range levels {
		levels[i].Shares = next.Shares[levels[i].Name]
		levels[i].Seats = next.Seats(levels[i].Name)
		if levels[i].Seats < levels[i].Need {
			p.Fits = false
		}
	}
	queuesFor(&levels[0], c, ds, o)
	p.Levels = levels
	return p
}

// queuesFor sizes the shared level's queues. Fair queuing deals each flow
// (a FlowSchema and a namespace: each of a tenant's verb classes is one)
// a hand of HandSize of the level's queues, and a request waits in the
// shortest queue of its hand. The forecasts fit the level's seats (Propose
// sized it so), so what queues is a burst past them, and the flows likely
// to burst into long queues are the heavy tenants', those whose forecast
// needs more than an equal share of the level's seats: each of their
// classes with forecast requests (one when no rates are known) counts as a
// flow. A steady tenant then waits behind them only when every queue of
// its hand is one of theirs (crowding). The queues are today's, doubled
// while the apiserver takes them for the hand size, until that chance is
// at most MaxCrowding; the hand size stays, and the queues never shrink.
func queuesFor(l *Level, c Capacity, ds []Demand, o Options) {
	if c.SharedRejects {
		return
	}
	l.Queues, l.HandSize = cmp.Or(c.Queues, AddonQueues), cmp.Or(c.HandSize, AddonHandSize)
	if len(l.Tenants) == 0 {
		return
	}
	fair := l.Seats / float64(len(l.Tenants))
	in := map[string]bool{}
	for _, ns := range l.Tenants {
		in[ns] = true
	}
	for _, d := range ds {
		if in[d.Namespace] && d.Forecast*(1+o.Headroom) > fair {
			flows := 0
			for _, r := range d.Requests {
				if r.Forecast > 0 {
					flows++
				}
			}
			l.Heavy += max(flows, 1)
		}
	}
	for {
		l.Crowding = crowding(l.Heavy, int(l.HandSize), int(l.Queues))
		if l.Crowding <= o.MaxCrowding {
			return
		}
		if entropyBits(2*l.Queues, l.HandSize) > maxHashBits {
			l.Crowded = true
			return
		}
		l.Queues *= 2
	}
}

// entropyBits and maxHashBits are the apiserver's limit on a level's
// shuffle sharding (k8s.io/apiserver's shufflesharding.RequiredEntropyBits
// and MaxHashBits): ceil(log2(queues)·hand) may not exceed 60, or the
// level is refused. A hand of 6 takes up to 1,024 queues, of 8 up to 181.
func entropyBits(queues, hand int32) int {
	return int(math.Ceil(math.Log2(float64(queues)) * float64(hand)))
}

const maxHashBits = 60

// crowding is the chance that a hand of h of q queues lies within the
// queues that heavy flows' hands hold: H random hands cover
// U = q·(1-(1-h/q)^H) of them on average, and a hand falls within U with
// chance C(U,h)/C(q,h).
func crowding(heavy, h, q int) float64 {
	u := float64(q) * (1 - math.Pow(1-float64(h)/float64(q), float64(heavy)))
	p := 1.0
	for i := range h {
		p *= math.Max(u-float64(i), 0) / float64(q-i)
	}
	return p
}

// String is the proposal in one line per level, then one per tenant (its
// seats and request rates, recent peak -> forecast), for the CLI.
func (p Proposal) String() string {
	var s string
	for _, l := range p.Levels {
		s += fmt.Sprintf("%s: %d shares, %.0f seats for a need of %.1f (%d tenants)", l.Name, l.Shares, l.Seats, l.Need, len(l.Tenants))
		if l.Queues > 0 {
			s += fmt.Sprintf("; %d queues, hand %d", l.Queues, l.HandSize)
		}
		if l.Heavy > 0 {
			s += fmt.Sprintf(" (%d heavy flows: a steady tenant's hand all theirs with chance %.2g)", l.Heavy, l.Crowding)
		}
		s += "\n"
	}
	for _, d := range p.Demands {
		s += fmt.Sprintf("  %s: seats %.1f -> %.1f", d.Namespace, d.Recent, d.Forecast)
		for _, c := range Classes {
			if r, ok := d.Requests[c]; ok {
				s += fmt.Sprintf(", %s %.1f -> %.1f/s", c, r.Recent, r.Forecast)
			}
		}
		s += "\n"
	}
	if l := p.Levels; len(l) > 0 && l[0].Crowded {
		s += fmt.Sprintf("%d heavy flows crowd the shared level's %d queues: give the heaviest tenants levels of their own\n", l[0].Heavy, l[0].Queues)
	}
	if !p.Fits {
		s += fmt.Sprintf("the forecast does not fit the server's %d seats: raise --max-requests-inflight or add apiservers\n", p.Capacity.ServerSeats)
	}
	return s
}
