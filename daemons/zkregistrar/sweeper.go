package zkregistrar

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/serverset"
)

// ReasonRegistrarGone is the reason the sweeper gives a True condition
// whose member znode has been gone for longer than the grace.
const ReasonRegistrarGone = "RegistrarGone"

// Serversets is what the sweeper reads from ZooKeeper; the node's
// serverset.Registrar implements it with its own session.
type Serversets interface {
	Root() string
	Children(dir string) ([]string, error)
	Member(p string) (serverset.Member, bool, error)
}

var _ Serversets = (*serverset.Registrar)(nil)

// SweeperConfig configures a Sweeper; NewSweeper applies defaults.
type SweeperConfig struct {
	Client     kubernetes.Interface
	Serversets Serversets
	// Interval between sweeps (default 10s).
	Interval time.Duration
	// Grace is how long a True pod's member znode must stay absent before
	// the sweeper writes False (default 20s): longer than a registrar
	// restart or a re-registration after a session expiry, so that it never
	// races a registrar that is about to write.
	Grace  time.Duration
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// Sweeper covers the pods whose node's registrar is gone: it sets the
// trellis.dev/registered condition False on pods that carry True while
// their member znode has been absent for longer than Grace. One registrar
// of the cluster runs it, elected with a Lease (see RunElected). The
// node's registrar, when it comes back, sets True again once it has
// re-created the znode (Gate).
type Sweeper struct {
	cfg SweeperConfig
	log *slog.Logger
	// absent: since when each True pod's member has been seen missing.
	absent map[types.UID]time.Time
	// names caches member znode -> endpoint, since member data never
	// changes (a change is a new znode): a sweep reads only new members.
	names map[string]string
	// seen: the last znode seen for each pod, to name it when it is gone.
	seen   map[types.UID]string
	writes atomic.Int64
	// longest is the longest pass Run has made, in nanoseconds.
	longest atomic.Int64
}

// NewSweeper returns a Sweeper.
func NewSweeper(cfg SweeperConfig) (*Sweeper, error) {
	if cfg.Client == nil || cfg.Serversets == nil {
		return nil, fmt.Errorf("zkregistrar: sweeper needs Client and Serversets")
	}
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.Grace == 0 {
		cfg.Grace = 20 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sweeper{cfg: cfg, log: cfg.Logger, absent: map[types.UID]time.Time{}, names: map[string]string{}, seen: map[types.UID]string{}}, nil
}

// Writes is the number of condition writes the sweeper has sent.
func (s *Sweeper) Writes() int64 { return s.writes.Load() }

// LongestPass is the longest pass Run has made. A pass longer than the
// interval delays the next, and with it a False write, by up to its own
// length: on a loaded node that is the sweeper's share of the time a
// gone registrar's pods take to turn False.
func (s *Sweeper) LongestPass() time.Duration { return time.Duration(s.longest.Load()) }

// Run sweeps every Interval until ctx ends. A failed sweep is logged and
// the next one starts over (level-triggered).
func (s *Sweeper) Run(ctx context.Context) error {
	// A new leader starts with no memory of absences: it waits a full
	// grace before it writes, like the one before it.
	clear(s.absent)
	// The grid passes are dated on starts before the ticker, so that
	// every tick is due when it arrives.
	start := s.cfg.Clock.Now()
	t := s.cfg.Clock.NewTicker(s.cfg.Interval)
	defer t.Stop()
	at := start
	for {
		began := s.cfg.Clock.Now()
		if err := s.sweep(ctx, at); err != nil {
			s.log.Warn("sweep failed; will retry", "err", err)
		}
		if d := int64(s.cfg.Clock.Since(began)); d > s.longest.Load() {
			s.longest.Store(d) // only Run writes it
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			at = passDate(start, s.cfg.Clock.Now(), s.cfg.Interval)
		}
	}
}

// passDate dates a pass by the last tick of the exact grid (start + k
// intervals) due when it starts. Not by the tick's own time: a ticker's
// times lie a little after the grid, by a different amount each time, so
// two of them may be a hair less than two intervals apart and a 2-interval
// grace would end a tick late. And not by the tick delivered: after a pass
// longer than an interval, the ticker delivers its oldest due tick late
// and drops the next, and the pass the grace ends on would never run.
func passDate(start, now time.Time, interval time.Duration) time.Time {
	return start.Add(now.Sub(start) / interval * interval)
}

// Sweep is one pass. Its cost: one LIST of the pods labelled
// trellis.dev/service, served from the apiserver's watch cache
// (resourceVersion 0); one ZooKeeper children read per serverset that
// holds a True pod, plus one read per member znode not seen before; a
// pods/status patch per pod that turns False.
func (s *Sweeper) Sweep(ctx context.Context) error { return s.sweep(ctx, s.cfg.Clock.Now()) }

// sweep is a pass dated now: absences are timed from the ticks that found
// them, not from when a pass's reads came back. A pass whose LIST or
// ZooKeeper reads ran slow (a loaded node) would otherwise date an
// absence late and let the grace end up to one interval after it should.
func (s *Sweeper) sweep(ctx context.Context, now time.Time) error {
	pods, err := s.cfg.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: wellknown.LabelService, ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("failed to list pods labelled %s: %w", wellknown.LabelService, err)
	}
	type candidate struct {
		pod      *corev1.Pod
		dir, end string
	}
	var cands []candidate
	dirs := map[string]map[string]string{} // dir -> endpoint -> znode
	for i := range pods.Items {
		p := &pods.Items[i]
		c := gateCondition(p)
		if !Gated(p) || c == nil || c.Status != corev1.ConditionTrue {
			continue
		}
		regs, err := Registrations(p)
		if err != nil || len(regs) == 0 {
			continue // not serving, or invalid: its node's registrar says so
		}
		for _, r := range regs {
			dir := r.Dir(s.cfg.Serversets.Root())
			cands = append(cands, candidate{pod: p, dir: dir, end: endpoint(r.Member.ServiceEndpoint)})
			dirs[dir] = nil
		}
	}
	for dir := range dirs {
		ends, err := s.members(dir)
		if err != nil {
			return err // never take no answer for no member
		}
		dirs[dir] = ends
	}
	keep := make(map[types.UID]bool, len(cands))
	for _, c := range cands {
		keep[c.pod.UID] = true
		if z, ok := dirs[c.dir][c.end]; ok {
			s.seen[c.pod.UID] = z
			delete(s.absent, c.pod.UID)
			continue
		}
		since, ok := s.absent[c.pod.UID]
		if !ok {
			s.absent[c.pod.UID] = now
			s.log.Info("a True pod's member is gone; the grace starts", "pod", c.pod.Namespace+"/"+c.pod.Name,
				"dir", c.dir, "endpoint", c.end, "pass", now, "grace", s.cfg.Grace)
			continue
		}
		if gone := now.Sub(since); gone >= s.cfg.Grace {
			s.markGone(ctx, c.pod, c.dir, c.end, gone)
		}
	}
	for uid := range s.absent {
		if !keep[uid] {
			delete(s.absent, uid)
		}
	}
	for uid := range s.seen {
		if !keep[uid] {
			delete(s.seen, uid)
		}
	}
	return nil
}

// members returns endpoint -> znode path of the members under dir.
func (s *Sweeper) members(dir string) (map[string]string, error) {
	names, err := s.cfg.Serversets.Children(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(names))
	present := make(map[string]bool, len(names))
	for _, n := range names {
		p := path.Join(dir, n)
		present[p] = true
		end, ok := s.names[p]
		if !ok {
			m, isMember, err := s.cfg.Serversets.Member(p)
			if err != nil {
				return nil, err
			}
			if !isMember {
				continue
			}
			end = endpoint(m.ServiceEndpoint)
			s.names[p] = end
		}
		out[end] = p
	}
	for p := range s.names {
		if path.Dir(p) == dir && !present[p] {
			delete(s.names, p) // gone
		}
	}
	return out, nil
}

func (s *Sweeper) markGone(ctx context.Context, p *corev1.Pod, dir, end string, gone time.Duration) {
	znode := s.seen[p.UID]
	if znode == "" {
		znode = "the member znode of " + end + " under " + dir
	}
	msg := fmt.Sprintf("%s has been gone for %s: the registrar of node %s is gone (its ZooKeeper session expired)",
		znode, gone.Round(time.Second), p.Spec.NodeName)
	s.writes.Add(1)
	// Conditional on the listed resourceVersion: if the node's registrar
	// (or the kubelet) wrote since, the patch is refused and the next sweep
	// looks again.
	if err := patchCondition(ctx, s.cfg.Client, p, p.ResourceVersion, corev1.ConditionFalse, ReasonRegistrarGone, msg, s.cfg.Clock.Now()); err != nil {
		s.log.Warn("readiness gate not written; will retry", "pod", p.Namespace+"/"+p.Name, "err", err)
		return
	}
	delete(s.absent, p.UID)
	s.log.Info("readiness gate", "pod", p.Namespace+"/"+p.Name, "status", corev1.ConditionFalse, "reason", ReasonRegistrarGone, "znode", znode)
}

func endpoint(e serverset.Endpoint) string {
	return net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
}
