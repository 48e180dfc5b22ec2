package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

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
