package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	"k8s.io/kops/pkg/resources"
	"k8s.io/kops/upup/pkg/fi"
)

// deletes records the order of deletions; refuse makes a resource's
// deleter fail.
type deletes struct {
	mu     sync.Mutex
	order  []string
	refuse map[string]bool
}

func (d *deletes) resource(typ, id string, blocks ...string) *resources.Resource {
	return &resources.Resource{Type: typ, ID: id, Blocks: blocks, Deleter: func(_ fi.Cloud, r *resources.Resource) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.refuse[key(r)] {
			return errors.New("refused")
		}
		d.order = append(d.order, key(r))
		return nil
	}}
}

func resourceMap(rs ...*resources.Resource) map[string]*resources.Resource {
	m := map[string]*resources.Resource{}
	for _, r := range rs {
		m[key(r)] = r
	}
	return m
}

func TestDeletionWaitsForBlockers(t *testing.T) {
	d := &deletes{}
	// A subnet blocks its VPC, an instance its subnet (kops's Blocks).
	all := resourceMap(d.resource("vpc", "v"), d.resource("subnet", "s", "vpc:v"), d.resource("instance", "i", "subnet:s"))
	del := newDeletion(nil, all, &bytes.Buffer{}, time.Millisecond, time.Minute, time.Now)
	if err := del.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"instance:i", "subnet:s", "vpc:v"}, d.order); diff != "" {
		t.Errorf("deletion order (-want +got):\n%s", diff)
	}
}

func TestDeletionStopsBetweenPassesWhenCancelled(t *testing.T) {
	d := &deletes{refuse: map[string]bool{"vpc:v": true}}
	all := resourceMap(d.resource("vpc", "v"), d.resource("subnet", "s", "vpc:v"))
	out := &lockedBuffer{}
	del := newDeletion(nil, all, out, time.Hour, 2*time.Hour, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- del.run(ctx) }()
	// The first pass ends in an hour's pause; cancelling must end it.
	for !bytes.Contains(out.bytes(), []byte("Pass 1: ")) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("cancelled deletion returned %v, want ErrInterrupted", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled deletion did not stop in its pause between passes")
	}
	if !slices.Equal(del.deleted, []string{"subnet:s"}) || !slices.Equal(del.left(), []string{"vpc:v"}) {
		t.Errorf("deleted %v, left %v; want subnet deleted, vpc left", del.deleted, del.left())
	}
}

func TestDeletionKeepsANATGatewaysRouteTableUntilItIsGone(t *testing.T) {
	d := &deletes{refuse: map[string]bool{"nat-gateway:ngw": true}}
	// kops's trackers: the private route table is blocked only by its
	// associated subnet, the NAT gateway blocks only its Elastic IP.
	rt := d.resource("route-table", "rt", "vpc:v")
	rt.Blocked = []string{"subnet:private"}
	rt.Obj = ec2types.RouteTable{RouteTableId: aws.String("rt"), Routes: []ec2types.Route{{NatGatewayId: aws.String("ngw")}}}
	ngw := d.resource("nat-gateway", "ngw", "elastic-ip:eip")
	ngw.Obj = ec2types.NatGateway{NatGatewayId: aws.String("ngw"), SubnetId: aws.String("utility")}
	all := resourceMap(d.resource("vpc", "v"), rt, ngw, d.resource("elastic-ip", "eip"),
		d.resource("subnet", "private", "vpc:v"), d.resource("subnet", "utility", "vpc:v"))
	// One pass: the wait is zero.
	del := newDeletion(nil, all, &bytes.Buffer{}, time.Hour, 0, time.Now)
	if err := del.run(context.Background()); !errors.Is(err, ErrDeleteUnfinished) {
		t.Fatalf("deletion with its NAT gateway refused returned %v, want ErrDeleteUnfinished", err)
	}
	// The route table is how kops finds the gateway again; the utility
	// subnet still holds the gateway's interface.
	want := []string{"elastic-ip:eip", "nat-gateway:ngw", "route-table:rt", "subnet:utility", "vpc:v"}
	if diff := cmp.Diff(want, del.left()); diff != "" {
		t.Errorf("left after the NAT gateway was refused (-want +got):\n%s", diff)
	}

	d.refuse = nil
	if err := newDeletion(nil, all, &bytes.Buffer{}, time.Millisecond, time.Minute, time.Now).run(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := func(a, b string) bool { return slices.Index(d.order, a) < slices.Index(d.order, b) }
	if !before("nat-gateway:ngw", "route-table:rt") || !before("nat-gateway:ngw", "subnet:utility") || !before("route-table:rt", "elastic-ip:eip") {
		t.Errorf("deletion order %v: want the NAT gateway before its route table and its subnet, and its address after the route table", d.order)
	}
}

func TestDeletionGivesUpAfterItsWait(t *testing.T) {
	d := &deletes{refuse: map[string]bool{"vpc:v": true}}
	// Each reading of the clock is a minute later: the first pass ends
	// at the one-minute wait.
	now := time.Unix(0, 0)
	clock := func() time.Time { now = now.Add(time.Minute); return now }
	del := newDeletion(nil, resourceMap(d.resource("vpc", "v")), &bytes.Buffer{}, time.Hour, time.Minute, clock)
	if err := del.run(context.Background()); !errors.Is(err, ErrDeleteUnfinished) {
		t.Fatalf("deletion past its wait returned %v, want ErrDeleteUnfinished", err)
	}
}

// lockedBuffer is written by the deletion while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.b.Bytes())
}
