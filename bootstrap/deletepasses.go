package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/kops/pkg/resources"
	awsresources "k8s.io/kops/pkg/resources/aws"
	"k8s.io/kops/upup/pkg/fi"
)

// ErrDeleteUnfinished is returned when a delete's wait ran out before every
// cloud resource was gone.
var ErrDeleteUnfinished = errors.New("cloud resources are left")

// deletion deletes a cluster's resources as kops's ops.DeleteResources
// does (a resource once every resource blocking it is gone, resources of
// one GroupKey together, pass after pass until all are gone), but it
// writes its progress to out instead of stdout and it watches a context:
// a cancelled delete (SIGINT, SIGTERM) stops before its next phase or pass
// with no call in flight, and says what is gone and what is left, where
// kops's loop would go on until its wait ran out.
type deletion struct {
	cloud    fi.Cloud
	all      map[string]*resources.Resource
	out      io.Writer
	interval time.Duration
	wait     time.Duration
	now      func() time.Time

	deps    map[string][]string
	done    map[string]bool
	deleted []string
	lastErr map[string]error
}

func newDeletion(cloud fi.Cloud, all map[string]*resources.Resource, out io.Writer, interval, wait time.Duration, now func() time.Time) *deletion {
	d := &deletion{cloud: cloud, all: all, out: out, interval: interval, wait: wait, now: now,
		deps: map[string][]string{}, done: map[string]bool{}, lastErr: map[string]error{}}
	for k, r := range all {
		for _, b := range r.Blocks {
			d.deps[b] = append(d.deps[b], k)
		}
		d.deps[k] = append(d.deps[k], r.Blocked...)
		if r.Done {
			d.done[k] = true
		}
	}
	d.keepNATGatewaysListable()
	return d
}

// keepNATGatewaysListable orders what kops leaves unordered around a NAT
// gateway. kops finds a cluster's NAT gateways only through the routes of
// its route tables, so a route table deleted before its NAT gateway (kops
// deletes both in one phase) leaves a gateway, and its Elastic IP, that no
// later delete can find: an interrupted or refused delete would leak them.
// A route table therefore waits for the NAT gateways it routes to, and a
// subnet for the NAT gateways in it (AWS refuses the subnet's delete while
// the gateway's interface is there). The gateway's Elastic IP waits for
// that route table too: kops lists the address through the gateway, and
// a gateway still routed to whose address is released fails the whole
// listing (DescribeAddresses, InvalidAllocationID.NotFound). An address
// left alone after its route table is found by its ownership tag
// (addOwnedAddresses).
func (d *deletion) keepNATGatewaysListable() {
	for k, r := range d.all {
		switch obj := r.Obj.(type) {
		case ec2types.RouteTable:
			for _, route := range obj.Routes {
				ngw := awsresources.TypeNatGateway + ":" + aws.ToString(route.NatGatewayId)
				if route.NatGatewayId == nil || d.all[ngw] == nil {
					continue
				}
				d.deps[k] = append(d.deps[k], ngw)
				for _, b := range d.all[ngw].Blocks {
					if d.all[b] != nil && d.all[b].Type == awsresources.TypeElasticIp {
						d.deps[b] = append(d.deps[b], k)
					}
				}
			}
		case ec2types.NatGateway:
			if subnet := string(ec2types.ResourceTypeSubnet) + ":" + aws.ToString(obj.SubnetId); obj.SubnetId != nil && d.all[subnet] != nil {
				d.deps[subnet] = append(d.deps[subnet], k)
			}
		}
	}
}

// run deletes until every resource is gone, the wait runs out or ctx is
// cancelled (then the error wraps ErrInterrupted).
func (d *deletion) run(ctx context.Context) error {
	deadline := d.now().Add(d.wait)
	for pass := 1; ; pass++ {
		clear(d.lastErr)
		attempted := map[string]bool{}
		for {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("%w (%v) during pass %d", ErrInterrupted, context.Cause(ctx), pass)
			}
			phase := d.ready(attempted)
			if len(phase) == 0 {
				break
			}
			d.deletePhase(phase)
		}
		left := d.left()
		if len(left) == 0 {
			return nil
		}
		if !d.now().Before(deadline) {
			return fmt.Errorf("%w after %s: %d of %d", ErrDeleteUnfinished, d.wait, len(left), len(d.all))
		}
		fmt.Fprintf(d.out, "Pass %d: %d deleted, %d left; next pass in %s.\n", pass, len(d.deleted), len(left), d.interval)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v) after pass %d", ErrInterrupted, context.Cause(ctx), pass)
		case <-time.After(d.interval):
		}
	}
}

// ready returns the resources not yet tried in this pass whose blockers
// are all gone, grouped by their GroupKey.
func (d *deletion) ready(attempted map[string]bool) map[string][]*resources.Resource {
	groups := map[string][]*resources.Resource{}
	for k, r := range d.all {
		if d.done[k] || attempted[k] {
			continue
		}
		blocked := false
		for _, dep := range d.deps[k] {
			if !d.done[dep] {
				blocked = true
				break
			}
		}
		if blocked {
			continue
		}
		attempted[k] = true
		g := r.GroupKey
		if g == "" {
			g = "_" + k
		}
		groups[g] = append(groups[g], r)
	}
	return groups
}

// deletePhase deletes the groups at once and records each outcome.
func (d *deletion) deletePhase(groups map[string][]*resources.Resource) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, rs := range groups {
		wg.Go(func() {
			var err error
			if rs[0].GroupDeleter != nil {
				err = rs[0].GroupDeleter(d.cloud, rs)
			} else {
				err = rs[0].Deleter(d.cloud, rs[0])
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rs {
				k := key(r)
				switch {
				case err == nil:
					d.done[k] = true
					d.deleted = append(d.deleted, k)
					fmt.Fprintf(d.out, "  deleted  %s\n", k)
				case awsresources.IsDependencyViolation(err):
					d.lastErr[k] = err
					fmt.Fprintf(d.out, "  waiting  %s (still has dependencies)\n", k)
				default:
					d.lastErr[k] = err
					fmt.Fprintf(d.out, "  failed   %s (will retry): %v\n", k, err)
				}
			}
		})
	}
	wg.Wait()
}

// left lists the resources not deleted, sorted.
func (d *deletion) left() []string {
	var out []string
	for k := range d.all {
		if !d.done[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func key(r *resources.Resource) string { return r.Type + ":" + r.ID }
