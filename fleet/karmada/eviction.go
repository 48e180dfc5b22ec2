package karmada

import "time"

// Failover's pace. karmada-controller-manager's taint manager queues every
// binding of a member whose NoExecute taint is not tolerated (again every
// 10 s while it stays tainted) on one queue shared by all members, and each
// of its EvictionWorkers waits 1/rate after every binding it looks at,
// whether it evicted it or not (a binding already moved, a member already
// back). Karmada's default rate, 0.5, takes 1.5 bindings a second: with 100
// services on a member, a failover that begins while the previous one's
// bindings are still queued waits about a minute more for a binding's turn
// (docs/design/fleet.md). The rate stays a limit (a control plane cut off from
// every member must not evict everything at once), set from the bound a
// fleet states.
const (
	// DefaultEvictionRate is Trellis's --resource-eviction-rate: 15
	// bindings a second, 1,000 in 67 s.
	DefaultEvictionRate float32 = 5
	// EvictionWorkers is the taint manager's fixed concurrency.
	EvictionWorkers = 3
)

func (o Options) evictionRate() float32 {
	if o.EvictionRate > 0 {
		return o.EvictionRate
	}
	return DefaultEvictionRate
}

// EvictionBound is how long the taint manager may take, after a member's
// toleration ends, to evict the last of queued bindings: every binding of
// the fleet queued once (a member's own, and what earlier failovers left)
// at EvictionWorkers × the rate a second.
func (o Options) EvictionBound(queued int) time.Duration {
	return time.Duration(float64(queued) / float64(EvictionWorkers*o.evictionRate()) * float64(time.Second))
}

// EvictionBound is Options.EvictionBound for this control plane's options.
func (cp *ControlPlane) EvictionBound(queued int) time.Duration {
	return cp.opts.EvictionBound(queued)
}
