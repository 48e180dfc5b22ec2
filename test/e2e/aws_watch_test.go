//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/testutil/liveset"
)

// Each rollout watcher samples every 250 ms (4/s). It must keep at least
// watchMinRate good samples per second over the whole watched period (a
// stalled watcher sees nothing and must not pass: the serverset dip of
// issue 44 lasted about 2 s), and at most watchMaxErrors of its samples
// may error.
const (
	watchEvery     = 250 * time.Millisecond
	watchMinRate   = 2.0
	watchMaxErrors = 0.01
)

// watcher samples a count into a liveset.Tally until stopped.
type watcher struct {
	tally  *liveset.Tally
	began  time.Time
	ended  time.Time
	cancel context.CancelFunc
	done   chan struct{}
}

func watch(ctx context.Context, what string, minimum int, sample func(context.Context) (int, error)) *watcher {
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{tally: &liveset.Tally{What: what, Minimum: minimum}, began: time.Now(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			n, err := sample(ctx)
			if ctx.Err() != nil {
				return // cut short by stop: not a sample
			}
			w.tally.Add(time.Now(), n, err)
			time.Sleep(watchEvery)
		}
	}()
	return w
}

func (w *watcher) stop() {
	w.cancel()
	<-w.done
	w.ended = time.Now()
}

// check fails the test for every way the watcher's samples fail (under
// the minimum, too few, too many errors) and logs its account.
func (w *watcher) check(t *testing.T) {
	t.Helper()
	s := w.tally.Summary()
	over := w.ended.Sub(w.began)
	for _, f := range s.Check(over, watchMinRate, watchMaxErrors) {
		t.Errorf("watcher of %s: %s", w.tally.What, f)
	}
	t.Logf("watcher of %s: %d samples over %s (%.1f/s), %d errored, minimum %d (budget %d)",
		w.tally.What, s.Samples, over.Round(time.Second), float64(s.Samples)/over.Seconds(), s.Errors, s.Min, w.tally.Minimum)
}

// readyAddrs lists svc's pods and returns how many are Ready and their
// addresses at port.
func readyAddrs(ctx context.Context, ns, svc string, port int) (int, map[string]bool, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: wellknown.LabelWorkload + "=" + svc})
	if err != nil {
		return 0, nil, fmt.Errorf("failed to list pods of %s/%s: %w", ns, svc, err)
	}
	addrs := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if podReady(p) && p.Status.PodIP != "" {
			addrs[net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port))] = true
		}
	}
	return len(addrs), addrs, nil
}

// watchReady samples svc's Ready pods against the PDB's minimum.
func watchReady(ctx context.Context, ns, svc string, port, minAvailable int) *watcher {
	return watch(ctx, "Ready pods of "+svc, minAvailable, func(ctx context.Context) (int, error) {
		n, _, err := readyAddrs(ctx, ns, svc, port)
		return n, err
	})
}

// watchLive samples the live members of a serverset, read with
// go-zookeeper directly: ephemeral, owned by a session connected to the
// ensemble (the cons four-letter command on servers), at a Ready pod's
// address (see liveset.Count).
func watchLive(ctx context.Context, conn *zk.Conn, servers []string, dir, ns, svc string, port, minimum int) *watcher {
	return watch(ctx, "live members of "+dir, minimum, func(ctx context.Context) (int, error) {
		return liveMembers(ctx, conn, servers, dir, ns, svc, port)
	})
}

func liveMembers(ctx context.Context, conn *zk.Conn, servers []string, dir, ns, svc string, port int) (int, error) {
	_, ready, err := readyAddrs(ctx, ns, svc, port)
	if err != nil {
		return 0, err
	}
	sessions, err := liveset.Sessions(servers, 5*time.Second)
	if err != nil {
		return 0, err
	}
	nodes, err := liveset.Read(conn, dir)
	if err != nil {
		return 0, err
	}
	n, _ := liveset.Count(nodes, sessions, ready)
	return n, nil
}
