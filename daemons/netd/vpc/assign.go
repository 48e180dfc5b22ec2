package vpc

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// errNotReady: an attached ENI is not ready on the node yet.
var errNotReady = errors.New("an attached ENI is not ready on the node yet")

// Key names a pod's interface as the CNI does.
type Key struct {
	Container, Iface, Pod string
}

// Assign gives the pod an address and records it before returning. The
// same container and interface get the same address again (a retried CNI
// ADD). With no free address it grows the pool first, which waits on EC2.
func (p *Pool) Assign(ctx context.Context, k Key) (Assignment, error) {
	if k.Container == "" || k.Iface == "" {
		return Assignment{}, errors.New("a container id and an interface name are required")
	}
	for {
		a, ok, err := p.take(k, false)
		if err != nil || ok {
			return a, err
		}
		err = p.grow(ctx, max(1, p.cfg.WarmAddresses), true)
		if errors.Is(err, errNotReady) {
			select {
			case <-ctx.Done():
				return Assignment{}, fmt.Errorf("waiting for an attached ENI to be ready on the node: %w", ctx.Err())
			case <-p.clock.After(100 * time.Millisecond):
			}
			continue
		}
		if errors.Is(err, ErrExhausted) {
			// At the limits: an address still cooling down is better
			// than no pod.
			if a, ok, terr := p.take(k, true); terr != nil || ok {
				return a, terr
			}
		}
		if err != nil {
			return Assignment{}, err
		}
	}
}

// take assigns a free address, if there is one.
func (p *Pool) take(k Key, ignoreCooldown bool) (Assignment, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.byKey[k.Container+"/"+k.Iface]; ok {
		return *a, true, nil
	}
	e, ip, ok := p.pickLocked(ignoreCooldown)
	if !ok {
		return Assignment{}, false, nil
	}
	a := &Assignment{Container: k.Container, Iface: k.Iface, Pod: k.Pod, IP: ip, ENI: e.ID, Device: e.Device, Since: p.clock.Now().UTC()}
	p.used[ip], p.byKey[a.key()] = a, a
	if err := saveCheckpoint(p.cfg.StateFile, p.cfg.InstanceID, p.used); err != nil {
		delete(p.used, ip)
		delete(p.byKey, a.key())
		return Assignment{}, false, err
	}
	s := p.statsLocked()
	p.metrics.set(s)
	if s.Free < p.cfg.WarmAddresses {
		p.poke()
	}
	return *a, true, nil
}

// pickLocked chooses the free address released longest ago (never-used
// ones first) whose cooldown is over, on an ENI that is not draining.
func (p *Pool) pickLocked(ignoreCooldown bool) (*ENI, netip.Addr, bool) {
	var best *ENI
	var bestIP netip.Addr
	var bestAt time.Time
	now := p.clock.Now()
	for _, e := range p.enis {
		if e.draining || e.unwired {
			continue
		}
		for _, ip := range e.Addresses {
			if _, used := p.used[ip]; used || e.releasing[ip] {
				continue
			}
			at := p.freed[ip]
			if !ignoreCooldown && !at.IsZero() && now.Sub(at) < p.cfg.Cooldown {
				continue
			}
			if best == nil || at.Before(bestAt) {
				best, bestIP, bestAt = e, ip, at
			}
		}
	}
	return best, bestIP, best != nil
}

// Release frees the address of a container's interface; releasing one
// that holds none is not an error (CNI DEL is repeated). It returns what
// was released.
func (p *Pool) Release(container, iface string) (*Assignment, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.byKey[container+"/"+iface]
	if !ok {
		return nil, nil
	}
	delete(p.used, a.IP)
	delete(p.byKey, a.key())
	if err := saveCheckpoint(p.cfg.StateFile, p.cfg.InstanceID, p.used); err != nil {
		p.used[a.IP], p.byKey[a.key()] = a, a
		return nil, err
	}
	p.freed[a.IP] = p.clock.Now()
	p.metrics.set(p.statsLocked())
	return a, nil
}

// Collect releases the addresses of pods that are gone: alive says
// whether an assignment's pod still runs on the node with it (netd: the
// pod is on the node, and its status shows no other address). Assignments
// younger than grace are kept (their pod may not be listed yet).
func (p *Pool) Collect(alive func(Assignment) bool, grace time.Duration) ([]Assignment, error) {
	p.mu.Lock()
	var gone []*Assignment
	now := p.clock.Now()
	for _, a := range p.used {
		if now.Sub(a.Since) >= grace && !alive(*a) {
			gone = append(gone, a)
		}
	}
	p.mu.Unlock()
	var out []Assignment
	for _, a := range gone {
		r, err := p.Release(a.Container, a.Iface)
		if err != nil {
			return out, err
		}
		if r != nil {
			p.log.Info("released the address of a pod that is gone", "ip", r.IP, "pod", r.Pod, "container", r.Container)
			out = append(out, *r)
		}
	}
	return out, nil
}
