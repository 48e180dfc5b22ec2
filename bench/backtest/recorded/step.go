package recorded

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Step drives the tenants hour by hour with no clock. Each virtual hour's
// requests are the tenant's rate for that hour times Hour (the fraction
// carried to the next hour, as Run's pacing does), drawn from the same
// seed in the same order as Run's. They are sent as fast as the tenant's
// workers get answers, and the hour ends when every one has been answered;
// then boundary runs with the number of hours done (0 before the first),
// which is where a stamped recording reads the apiserver's counters. A busy
// machine makes an hour take longer; it cannot move a request into another
// hour. The returned Drove starts at VirtualStart.
func (d *Driver) Step(ctx context.Context, boundary func(ctx context.Context, done int) error) (Drove, error) {
	workers := d.Workers
	if workers == 0 {
		workers = 8
	}
	hours := d.Days * 24
	out := Drove{Start: VirtualStart, Issued: map[string][]int{}, Failed: map[string]int{}, Dropped: map[string]int{}}
	runs := make([]*tenantRun, len(d.Tenants))
	for i, tn := range d.Tenants {
		c, ok := d.Clients[tn.Name]
		if !ok {
			return out, fmt.Errorf("no client for tenant %s", tn.Name)
		}
		runs[i] = &tenantRun{Tenant: tn, c: c, issued: make([]atomic.Int64, hours),
			rand: rand.New(rand.NewPCG(d.Seed, uint64(i)))}
	}
	tokens, sent := make([]float64, len(runs)), make([]int, len(runs))
	if err := boundary(ctx, 0); err != nil {
		return out, err
	}
	for h := range hours {
		t := VirtualStart.Add(time.Duration(h) * time.Hour)
		var wg sync.WaitGroup
		for i, r := range runs {
			tokens[i] += r.Rate(t, float64(h)/24, r.rand) * d.Hour.Seconds()
			n := int(tokens[i])
			tokens[i] -= float64(n)
			work := make(chan byte, n)
			for range n {
				work <- mix[sent[i]%len(mix)]
				sent[i]++
			}
			close(work)
			for range min(workers, n) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for class := range work {
						if ctx.Err() != nil {
							return
						}
						r.issued[h].Add(1)
						if err := r.do(ctx, class); err != nil && ctx.Err() == nil {
							r.failed.Add(1)
						}
					}
				}()
			}
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("stopped in virtual hour %d: %w", h, err)
		}
		if err := boundary(ctx, h+1); err != nil {
			return out, fmt.Errorf("after virtual hour %d: %w", h, err)
		}
	}
	collect(&out, runs, hours)
	return out, nil
}

// collect copies what the tenants' runs counted into out.
func collect(out *Drove, runs []*tenantRun, hours int) {
	for _, r := range runs {
		is := make([]int, hours)
		for h := range is {
			is[h] = int(r.issued[h].Load())
		}
		out.Issued[r.Name] = is
		out.Failed[r.Name] = int(r.failed.Load())
		out.Dropped[r.Name] = r.dropped
	}
}
