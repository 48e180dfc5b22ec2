package recorded

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Driver issues each tenant's requests at its shape's rate, on a
// compressed clock, through the tenant's own client (so that the
// apiserver classifies them into the tenant's flow schemas).
type Driver struct {
	Tenants []Tenant
	// Clients by tenant name.
	Clients map[string]kubernetes.Interface
	// Hour is how long one virtual hour lasts.
	Hour time.Duration
	// Days to drive.
	Days int
	// Seed of the hours' noise.
	Seed uint64
	// Workers per tenant (default 8).
	Workers int
	// Clock paces the requests (default the real clock).
	Clock clock.WithTicker
}

// Drove is what a Driver did.
type Drove struct {
	// Start is the wall time virtual hour 0 began.
	Start time.Time
	// Issued are the requests each tenant sent, by virtual hour;
	// Failed those the apiserver answered with an error other than not
	// found; Dropped those not sent because the tenant's workers were all
	// busy (the apiserver was behind).
	Issued          map[string][]int
	Failed, Dropped map[string]int
}

// The verb classes' mix: of every five requests, two mutating (a pod
// created, or one deleted), two reads (a pod got) and one list.
var mix = [5]byte{'m', 'r', 'm', 'r', 'l'}

// Run drives every tenant in real time until its Days end or ctx ends:
// the requests of virtual hour h are those paced into wall time
// [Start+h·Hour, Start+(h+1)·Hour), so the hour a request lands in, as
// the apiserver counts it and Prometheus scrapes it, depends on the
// machine keeping up (the full recording, on a machine to itself). Step
// is the same shapes with no clock.
func (d *Driver) Run(ctx context.Context) (Drove, error) {
	clk := d.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	workers := d.Workers
	if workers == 0 {
		workers = 8
	}
	hours := d.Days * 24
	out := Drove{Start: clk.Now(), Issued: map[string][]int{}, Failed: map[string]int{}, Dropped: map[string]int{}}
	var wg sync.WaitGroup
	results := make([]*tenantRun, len(d.Tenants))
	for i, tn := range d.Tenants {
		c, ok := d.Clients[tn.Name]
		if !ok {
			return out, fmt.Errorf("no client for tenant %s", tn.Name)
		}
		r := &tenantRun{Tenant: tn, c: c, issued: make([]atomic.Int64, hours), work: make(chan op, 4*workers),
			rand: rand.New(rand.NewPCG(d.Seed, uint64(i)))}
		results[i] = r
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.serve(ctx)
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(r.work)
			r.pace(ctx, clk, out.Start, d.Hour, hours)
		}()
	}
	wg.Wait()
	collect(&out, results, hours)
	return out, nil
}

type op struct {
	class byte
	hour  int
}

type tenantRun struct {
	Tenant
	c       kubernetes.Interface
	rand    *rand.Rand
	work    chan op
	issued  []atomic.Int64
	failed  atomic.Int64
	dropped int

	mu      sync.Mutex
	pods    []string
	created int
	deletes bool
}

// pace turns the tenant's rate into requests, evenly spaced within each
// hour, every 5 ms of the clock.
func (r *tenantRun) pace(ctx context.Context, clk clock.WithTicker, start time.Time, hour time.Duration, hours int) {
	tick := clk.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	cur, rate, tokens, n := -1, 0.0, 0.0, 0
	last := start
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C():
			h := int(now.Sub(start) / hour)
			if h >= hours {
				return
			}
			// One draw per hour, in order, so that a seed gives the same
			// shapes.
			for cur < h {
				cur++
				t := VirtualStart.Add(time.Duration(cur) * time.Hour)
				rate = r.Rate(t, float64(cur)/24, r.rand)
			}
			tokens += rate * now.Sub(last).Seconds()
			last = now
			for ; tokens >= 1; tokens-- {
				select {
				case r.work <- op{class: mix[n%len(mix)], hour: h}:
					n++
				default:
					r.dropped++
				}
			}
		}
	}
}

func (r *tenantRun) serve(ctx context.Context) {
	for o := range r.work {
		if ctx.Err() != nil {
			continue
		}
		r.issued[o.hour].Add(1)
		if err := r.do(ctx, o.class); err != nil && ctx.Err() == nil {
			r.failed.Add(1)
		}
	}
}

// do sends one request of the class: mutating requests create pods until
// the tenant holds 20, then alternate deletes and creates.
func (r *tenantRun) do(ctx context.Context, class byte) error {
	pods := r.c.CoreV1().Pods(r.Name)
	switch class {
	case 'm':
		r.mu.Lock()
		del := len(r.pods) >= 20 && r.deletes
		var name string
		if del {
			name, r.pods = r.pods[0], r.pods[1:]
		} else {
			r.created++
			name = fmt.Sprintf("load-%d", r.created)
		}
		r.deletes = !r.deletes
		r.mu.Unlock()
		if del {
			return client.IgnoreNotFound(pods.Delete(ctx, name, metav1.DeleteOptions{}))
		}
		_, err := pods.Create(ctx, pod(name), metav1.CreateOptions{})
		if err == nil {
			r.mu.Lock()
			r.pods = append(r.pods, name)
			r.mu.Unlock()
		}
		return err
	case 'r':
		r.mu.Lock()
		name := "load-absent"
		if len(r.pods) > 0 {
			name = r.pods[len(r.pods)-1]
		}
		r.mu.Unlock()
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		return client.IgnoreNotFound(err)
	default:
		_, err := pods.List(ctx, metav1.ListOptions{Limit: 10})
		return err
	}
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "load"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(false),
			Containers:                   []corev1.Container{{Name: "c", Image: "trellis-pause"}},
		},
	}
}
