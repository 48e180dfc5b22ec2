package vpc

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// grow adds up to n addresses: on an attached ENI with room, else on a new
// ENI. With ifNonePickable it does nothing when an address became free
// while it waited for another change to finish.
func (p *Pool) grow(ctx context.Context, n int, ifNonePickable bool) error {
	p.change.Lock()
	defer p.change.Unlock()
	p.mu.Lock()
	if ifNonePickable {
		if _, _, ok := p.pickLocked(false); ok {
			p.mu.Unlock()
			return nil
		}
	}
	if slices.ContainsFunc(p.enis, func(e *ENI) bool { return e.unwired }) {
		// An attached ENI is not ready on the node yet (its interface
		// shows up seconds after the attach): wait for it rather than
		// attach another.
		p.mu.Unlock()
		p.wire(ctx)
		return errNotReady
	}
	var target *ENI
	for _, e := range p.enis {
		if !e.draining && len(e.Addresses)+1 < p.limits.AddressesPerENI {
			target = e
			break
		}
	}
	count, device := len(p.enis)+len(p.others), p.freeDeviceLocked()
	p.mu.Unlock()
	if target != nil {
		room := p.limits.AddressesPerENI - 1 - len(target.Addresses)
		got, err := p.addAddresses(ctx, target, min(n, room))
		if err != nil {
			p.markStale()
			return err
		}
		p.mu.Lock()
		for _, ip := range got {
			if !slices.Contains(target.Addresses, ip) {
				target.Addresses = append(target.Addresses, ip)
			}
		}
		p.metrics.set(p.statsLocked())
		p.mu.Unlock()
		p.log.Info("added pod addresses", "eni", target.ID, "count", len(got))
		return nil
	}
	if count >= p.limits.ENIs {
		return ErrExhausted
	}
	e, err := p.newENI(ctx, device, min(n, p.limits.AddressesPerENI-1))
	if err != nil {
		p.markStale()
		return err
	}
	p.mu.Lock()
	p.enis = append(p.enis, e)
	slices.SortFunc(p.enis, func(a, b *ENI) int { return a.Device - b.Device })
	p.metrics.set(p.statsLocked())
	p.mu.Unlock()
	p.log.Info("attached an ENI", "eni", e.ID, "device", e.Device, "addresses", len(e.Addresses))
	p.wire(ctx)
	return nil
}

func (p *Pool) freeDeviceLocked() int {
	for d := 1; ; d++ {
		if !slices.Contains(p.others, d) && !slices.ContainsFunc(p.enis, func(e *ENI) bool { return e.Device == d }) {
			return d
		}
	}
}

// shrink gives back free addresses above the warm target plus its margin:
// whole ENIs that hold no pod first (never the primary one), then single
// addresses from the last ENI down.
func (p *Pool) shrink(ctx context.Context) error {
	p.change.Lock()
	defer p.change.Unlock()
	p.mu.Lock()
	s := p.statsLocked()
	if s.Free <= p.cfg.WarmAddresses+p.cfg.ReleaseAbove {
		p.mu.Unlock()
		return nil
	}
	surplus := s.Free - p.cfg.WarmAddresses
	var drop []*ENI
	for _, e := range slices.Backward(p.enis) {
		if e.Device == 0 || surplus < len(e.Addresses) || slices.ContainsFunc(e.Addresses, func(ip netip.Addr) bool { return p.used[ip] != nil }) {
			continue
		}
		e.draining = true
		drop = append(drop, e)
		surplus -= len(e.Addresses)
	}
	release := map[*ENI][]netip.Addr{}
	for _, e := range slices.Backward(p.enis) {
		for _, ip := range e.Addresses {
			if surplus == 0 || e.draining {
				break
			}
			if p.used[ip] == nil {
				e.releasing[ip] = true
				release[e] = append(release[e], ip)
				surplus--
			}
		}
	}
	p.mu.Unlock()
	var errs []error
	defer func() {
		if len(errs) > 0 {
			p.markStale()
		}
	}()
	for _, e := range drop {
		err := p.removeENI(ctx, e)
		p.mu.Lock()
		if err == nil {
			p.enis = slices.DeleteFunc(p.enis, func(x *ENI) bool { return x == e })
			for _, ip := range e.Addresses {
				delete(p.freed, ip)
			}
		} else {
			e.draining = false
			errs = append(errs, err)
		}
		p.mu.Unlock()
		if err == nil {
			p.log.Info("detached and deleted an ENI no pod used", "eni", e.ID, "addresses", len(e.Addresses))
		}
	}
	for e, ips := range release {
		_, err := call(ctx, p.ec2, "UnassignPrivateIpAddresses", func(ctx context.Context) (*ec2.UnassignPrivateIpAddressesOutput, error) {
			strs := make([]string, len(ips))
			for i, ip := range ips {
				strs[i] = ip.String()
			}
			return p.cfg.EC2.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(e.ID), PrivateIpAddresses: strs})
		})
		p.mu.Lock()
		for _, ip := range ips {
			delete(e.releasing, ip)
			if err == nil {
				e.Addresses = slices.DeleteFunc(e.Addresses, func(x netip.Addr) bool { return x == ip })
				delete(p.freed, ip)
			}
		}
		p.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("ENI %s: %w", e.ID, err))
		} else {
			p.log.Info("gave back free addresses", "eni", e.ID, "count", len(ips))
		}
	}
	p.metrics.set(p.Stats())
	return errors.Join(errs...)
}

func (p *Pool) markStale() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stale = true
}

// reconcile reads the node's ENIs back from EC2 and takes them as the
// truth: addresses a failed or interrupted change left in EC2 become free
// ones, addresses gone from EC2 are no longer handed out, and after a
// failed change the node's unattached ENIs are deleted.
func (p *Pool) reconcile(ctx context.Context) error {
	p.change.Lock()
	defer p.change.Unlock()
	p.mu.Lock()
	stale := p.stale
	p.mu.Unlock()
	if stale {
		// A change was interrupted: a create EC2 did but never answered,
		// or a detach whose delete did not follow, leaves an ENI of this
		// node unattached. None of this pool's creations is in flight
		// (the change lock), so every such ENI is a leak.
		if n, err := p.collectLeaked(ctx); err != nil {
			return fmt.Errorf("leaked ENIs: %w", err)
		} else if n > 0 {
			p.log.Info("deleted ENIs an interrupted change left unattached", "count", n)
		}
	}
	enis, others, leaving, err := p.attached(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	owner := map[netip.Addr]*ENI{}
	for _, e := range enis {
		for _, ip := range e.Addresses {
			owner[ip] = e
		}
	}
	for ip, a := range p.used {
		if owner[ip] == nil {
			p.log.Error("a pod's address is no longer on the node in EC2", "ip", ip, "pod", a.Pod)
		}
	}
	old := p.owners()
	added, removed := 0, 0
	for ip := range owner {
		if old[ip] == nil {
			added++
		}
	}
	for ip := range old {
		if owner[ip] == nil {
			removed++
		}
	}
	if added+removed > 0 || len(enis) != len(p.enis) {
		p.log.Info("the node's ENIs in EC2 differed from the pool's view; took EC2's", "addressesAdded", added, "addressesRemoved", removed, "enis", len(enis))
	}
	ready := map[string]bool{}
	for _, e := range p.enis {
		ready[e.ID] = !e.unwired
	}
	for _, e := range enis {
		e.unwired = e.Device > 0 && !ready[e.ID]
	}
	// An ENI still detaching is deleted by a later sync, once EC2 has
	// finished: until then every sync reads the node back.
	p.enis, p.others, p.stale, p.reconciled = enis, others, leaving > 0, p.clock.Now()
	p.metrics.set(p.statsLocked())
	return nil
}

// Sync brings the free addresses to the warm target: it grows the pool
// below it (within the limits) and shrinks it above the margin. It reads
// the ENIs back from EC2 first when a change failed or ReconcileEvery
// passed.
func (p *Pool) Sync(ctx context.Context) error {
	p.mu.Lock()
	due := p.stale || p.clock.Since(p.reconciled) >= p.cfg.ReconcileEvery
	p.mu.Unlock()
	if due {
		if err := p.reconcile(ctx); err != nil {
			return err
		}
	}
	p.wire(ctx)
	for range 2*p.limits.ENIs + 2 {
		s := p.Stats()
		deficit := p.cfg.WarmAddresses - s.Free
		if deficit <= 0 || s.Free+s.Used >= s.Capacity {
			break
		}
		if err := p.grow(ctx, deficit, false); errors.Is(err, ErrExhausted) || errors.Is(err, errNotReady) {
			break
		} else if err != nil {
			return err
		}
	}
	return p.shrink(ctx)
}

// Run syncs whenever an assignment leaves the pool short, and every
// interval, until ctx ends.
func (p *Pool) Run(ctx context.Context, interval time.Duration) {
	t := p.clock.NewTicker(interval)
	defer t.Stop()
	for {
		if err := p.Sync(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("address pool sync failed; will retry", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-p.notify:
		case <-t.C():
		}
	}
}
