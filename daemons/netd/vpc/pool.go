package vpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ErrExhausted is returned when the node holds as many pod addresses as
// its instance type allows, all in use.
var ErrExhausted = errors.New("no pod address left on this node: its ENIs are at the instance type's limits")

// Config of a pool.
type Config struct {
	EC2        EC2
	InstanceID string
	// Cluster tags the ENIs the pool creates.
	Cluster string
	// StateFile is the checkpoint of assignments (e.g.
	// /var/lib/trellis-netd/addresses.json).
	StateFile string
	// WarmAddresses is how many free addresses the pool keeps (0: one
	// ENI's worth, as the AWS VPC CNI's default WARM_ENI_TARGET=1 keeps a
	// spare ENI; negative: none, every pod waits on EC2); it gives back
	// free ones above WarmAddresses+ReleaseAbove (default WarmAddresses),
	// down to WarmAddresses.
	WarmAddresses int
	ReleaseAbove  int
	// Cooldown keeps a released address from the next pod for a while,
	// so stale conntrack entries and routes to the old pod are gone
	// (default 30s, as the AWS VPC CNI's; negative: none).
	Cooldown time.Duration
	// ReconcileEvery is how often a sync reads the node's ENIs back from
	// EC2, to learn what changed outside the pool (default 1m).
	ReconcileEvery time.Duration
	// Wire readies a secondary ENI on the node (netd: its interface and
	// route table) before any pod takes one of its addresses; retried on
	// every sync until it succeeds.
	Wire       func(context.Context, ENI) error
	Discipline Discipline
	Clock      clock.WithTicker
	Log        *slog.Logger
}

// Stats count the node's addresses.
type Stats struct {
	ENIs, Free, Used, Capacity int
}

// Pool hands out the node's pod addresses.
type Pool struct {
	cfg     Config
	log     *slog.Logger
	clock   clock.WithTicker
	ec2     *caller
	metrics *Metrics
	host    host
	limits  Limits

	// change serializes what changes the node in EC2 (grow, shrink).
	change sync.Mutex

	mu sync.Mutex
	// stale: a change failed, so EC2 may have done it anyway; the next
	// sync reads the ENIs back before anything else (as it does every
	// ReconcileEvery).
	stale      bool
	reconciled time.Time
	enis       []*ENI
	others     []int // device indexes of ENIs that are not the pool's
	used       map[netip.Addr]*Assignment
	byKey      map[string]*Assignment
	freed      map[netip.Addr]time.Time // when an address was last released
	notify     chan struct{}
}

// Open reads the node's ENIs from EC2 and its assignments from the
// checkpoint, and deletes ENIs a previous run leaked.
func Open(ctx context.Context, cfg Config) (*Pool, error) {
	if cfg.EC2 == nil || cfg.InstanceID == "" || cfg.StateFile == "" {
		return nil, errors.New("vpc pool: EC2, InstanceID and StateFile are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Cooldown == 0 {
		cfg.Cooldown = 30 * time.Second
	}
	if cfg.ReconcileEvery == 0 {
		cfg.ReconcileEvery = time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m := newMetrics()
	p := &Pool{cfg: cfg, log: cfg.Log, clock: cfg.Clock, ec2: newCaller(cfg.Discipline, cfg.Clock, m), metrics: m,
		used: map[netip.Addr]*Assignment{}, byKey: map[string]*Assignment{}, freed: map[netip.Addr]time.Time{}, notify: make(chan struct{}, 1)}
	var err error
	if p.host, err = p.describeHost(ctx); err != nil {
		return nil, err
	}
	if p.limits, err = lookupLimits(ctx, p.ec2, p.cfg.EC2, p.host.instanceType); err != nil {
		return nil, err
	}
	switch {
	case p.cfg.WarmAddresses == 0:
		p.cfg.WarmAddresses = p.limits.AddressesPerENI - 1
	case p.cfg.WarmAddresses < 0:
		p.cfg.WarmAddresses = 0
	}
	if p.cfg.ReleaseAbove == 0 {
		p.cfg.ReleaseAbove = p.cfg.WarmAddresses
	}
	var leaving int
	if p.enis, p.others, leaving, err = p.attached(ctx); err != nil {
		return nil, err
	}
	p.stale = leaving > 0
	p.reconciled = p.clock.Now()
	p.wire(ctx)
	recorded, err := loadCheckpoint(cfg.StateFile, cfg.InstanceID)
	if err != nil {
		return nil, err
	}
	owner := p.owners()
	for _, a := range recorded {
		e, ok := owner[a.IP]
		if !ok {
			p.log.Warn("a recorded pod address is no longer on the node; dropped", "ip", a.IP, "pod", a.Pod)
			continue
		}
		a.ENI, a.Device = e.ID, e.Device
		p.used[a.IP], p.byKey[a.key()] = a, a
	}
	if len(p.used) != len(recorded) {
		if err := saveCheckpoint(cfg.StateFile, cfg.InstanceID, p.used); err != nil {
			return nil, err
		}
	}
	leaked, err := p.collectLeaked(ctx)
	if err != nil {
		return nil, fmt.Errorf("leaked ENIs: %w", err)
	}
	s := p.Stats()
	p.metrics.set(s)
	p.log.Info("address pool open", "instance", cfg.InstanceID, "type", p.host.instanceType, "limits", p.limits.String(),
		"enis", s.ENIs, "free", s.Free, "used", s.Used, "leakedENIsDeleted", leaked)
	return p, nil
}

// Limits are the node's instance type's limits.
func (p *Pool) Limits() Limits { return p.limits }

// SubnetCIDR is the node's subnet (the pool's ENIs are all in it).
func (p *Pool) SubnetCIDR() netip.Prefix { return p.host.subnetCIDR }

// Primary is the node's primary address (traffic leaving the VPC takes it).
func (p *Pool) Primary() netip.Addr { return p.host.primary }

// VPCCIDRs are the VPC's address ranges: pod traffic within them keeps the
// pod's address.
func (p *Pool) VPCCIDRs() []netip.Prefix { return slices.Clone(p.host.vpcCIDRs) }

// owners maps every secondary address to its ENI; mu held or no one else.
func (p *Pool) owners() map[netip.Addr]*ENI {
	m := map[netip.Addr]*ENI{}
	for _, e := range p.enis {
		for _, ip := range e.Addresses {
			m[ip] = e
		}
	}
	return m
}

// Stats counts the addresses now.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statsLocked()
}

func (p *Pool) statsLocked() Stats {
	// Other tools' ENIs count against the instance's limit.
	s := Stats{ENIs: len(p.enis), Used: len(p.used), Capacity: (p.limits.ENIs - len(p.others)) * (p.limits.AddressesPerENI - 1)}
	for _, e := range p.enis {
		for _, ip := range e.Addresses {
			if p.used[ip] == nil {
				s.Free++
			}
		}
	}
	return s
}

// Assignments returns a copy of what the pool records.
func (p *Pool) Assignments() []Assignment {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Assignment, 0, len(p.used))
	for _, a := range p.used {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b Assignment) int { return a.IP.Compare(b.IP) })
	return out
}

// ENIs returns a copy of the node's ENIs as the pool knows them.
func (p *Pool) ENIs() []ENI {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ENI, 0, len(p.enis))
	for _, e := range p.enis {
		c := *e
		c.Addresses = slices.Clone(e.Addresses)
		c.releasing = nil
		out = append(out, c)
	}
	return out
}

// Notify receives a value when the pool's free addresses ran below the
// warm target (Run syncs on it).
func (p *Pool) Notify() <-chan struct{} { return p.notify }

func (p *Pool) poke() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}
