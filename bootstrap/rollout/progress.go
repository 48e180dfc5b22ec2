package rollout

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// progress writes a run's progress to Options.Progress, one line a step in
// kind's style: the time since the run began, then what was done.
//
//	[   4.1s] general: batch 1/3 (canary): 1 new node passed the gates
//	[   9.8s] general: batch 2/3: drain of node-a waiting on PDB shop/web (for 5s)
//	[  12.0s] general: batch 2/3 done: 3/4 replaced (3/7 in all)
type progress struct {
	w     io.Writer
	clock clock.Clock
	start time.Time

	mu sync.Mutex
	// blocked: per node, the PDB last reported blocking its drain, and when.
	blocked map[string]blockedReport
}

type blockedReport struct {
	pdb string
	at  time.Time
}

// blockedEvery repeats a drain's "waiting on PDB" line while it waits.
const blockedEvery = 30 * time.Second

func newProgress(w io.Writer, c clock.Clock) *progress {
	return &progress{w: w, clock: c, start: c.Now(), blocked: map[string]blockedReport{}}
}

func (p *progress) printf(format string, args ...any) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "[%7s] %s\n", elapsed(p.clock.Since(p.start)), fmt.Sprintf(format, args...))
}

// elapsed is 4.1s under a minute, 2m05s above.
func elapsed(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// batch prints a line about g's current batch.
func (p *progress) batch(g *GroupProgress, format string, args ...any) {
	p.printf("%s: batch %s: %s", g.Name, batchOf(g), fmt.Sprintf(format, args...))
}

// drainBlocked reports a PDB refusing the drain of node: when it starts,
// when another PDB takes over, and every blockedEvery while it lasts.
func (p *progress) drainBlocked(g *GroupProgress, node, pdb string, since time.Time) {
	now := p.clock.Now()
	p.mu.Lock()
	last, ok := p.blocked[node]
	report := !ok || last.pdb != pdb || now.Sub(last.at) >= blockedEvery
	if report {
		p.blocked[node] = blockedReport{pdb: pdb, at: now}
	}
	p.mu.Unlock()
	if report {
		p.batch(g, "drain of %s waiting on PDB %s (for %s)", node, pdb, now.Sub(since).Round(time.Second))
	}
}

// drained forgets the node's blocking PDB.
func (p *progress) drained(node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.blocked, node)
}

// batchOf is "2/3", with " (canary)" for a group's one-node first batch.
func batchOf(g *GroupProgress) string {
	s := fmt.Sprintf("%d/%d", g.Batch.N, batchCount(len(g.Old), g.Strategy))
	if g.Strategy.Canary && g.Batch.N == 1 {
		s += " (canary)"
	}
	return s
}

// batchCount is the number of batches that replace n old nodes: a
// one-node canary first when the strategy has one, then batches of its
// size.
func batchCount(n int, s Strategy) int {
	if n <= 0 {
		return 0
	}
	k := s.batchSize()
	if s.Canary {
		return 1 + (n-1+k-1)/k
	}
	return (n + k - 1) / k
}

// replaced counts the replaced and old nodes of every group under way.
func (st *State) replaced() (done, total int) {
	for _, g := range st.Groups {
		done += len(g.Replaced)
		total += len(g.Old)
	}
	return done, total
}

// started reports the run's start: a new rollout, or one resumed.
func (r *Roller) started(st *State, resumed bool) {
	what := "onto " + st.Image
	if st.Image == "" {
		what = "(" + st.Reason + ")"
	}
	if resumed {
		done, total := st.replaced()
		r.progress.printf("rollout %s %s resumed by %s: %d/%d nodes replaced", st.ID, what, r.opts.Owner, done, total)
		return
	}
	r.progress.printf("rollout %s %s started by %s: groups %s, budget %d node(s) at once", st.ID, what, r.opts.Owner, strings.Join(st.GroupNames(), ", "), st.Budget)
}
