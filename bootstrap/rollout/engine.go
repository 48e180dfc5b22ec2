package rollout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Instance is a cloud instance of a group.
type Instance struct {
	ID string
	// Version is the launch-template version it was launched from.
	Version string
	// InService: the cloud reports it running and healthy in its group
	// (the gate of a CloudOnly group).
	InService bool
}

// Cloud is what a rollout needs from the cloud (AWS: see AWSCloud).
type Cloud interface {
	// ResolveImage turns ami-..., ssm:... or owner/name into an image id.
	ResolveImage(ctx context.Context, image string) (string, error)
	// Instances of a group and its desired capacity.
	Instances(ctx context.Context, group string) ([]Instance, int, error)
	// SetImage makes new instances of the group use image: a new launch
	// template version the group uses. Calling it again with the same
	// image changes nothing and reports the same versions. An empty image
	// keeps the group's image and reports its newest version (Relaunch).
	SetImage(ctx context.Context, group, imageID string) (ImageChange, error)
	// SetDesired sets the group's desired capacity (absolute: idempotent).
	SetDesired(ctx context.Context, group string, n int) error
	// Terminate terminates an instance of the group and decrements its
	// desired capacity; an instance already gone is not an error.
	Terminate(ctx context.Context, group, id string) error
	// Replace terminates an instance and leaves the desired capacity as it
	// is, so the group launches its replacement (in-place batches); an
	// instance already gone is not an error.
	Replace(ctx context.Context, group, id string) error
	// InstanceImages returns the image each instance runs.
	InstanceImages(ctx context.Context, ids []string) (map[string]string, error)
}

// ImageChange is what SetImage did.
type ImageChange struct {
	PrevVersion, PrevImage, NewVersion string
}

// Cluster is what a rollout needs from Kubernetes (see KubeCluster).
type Cluster interface {
	// Node returns the node of an instance, or nil while it has none.
	Node(ctx context.Context, instanceID string) (*corev1.Node, error)
	// Ready reports whether a new node passes the built-in gates (Ready,
	// every runtime DaemonSet pod Ready on it); reason says why not.
	Ready(ctx context.Context, node *corev1.Node) (ok bool, reason string, err error)
	// Taint marks an old node PreferNoSchedule.
	Taint(ctx context.Context, node *corev1.Node, rollout string) error
	// Drain cordons the node and evicts its pods through the Eviction API,
	// reporting PDBs that block (blocked is called while they do).
	Drain(ctx context.Context, node *corev1.Node, opts DrainOptions, blocked func(string)) error
}

// Store persists the state (the kops state store; a file in tests).
type Store interface {
	Load(ctx context.Context) (*State, error) // (nil, nil) when there is none
	Save(ctx context.Context, s *State) error
}

// Roller runs a rollout.
type Roller struct {
	cloud   Cloud
	cluster Cluster
	store   Store
	opts    Options
	log     *slog.Logger

	mu       sync.Mutex
	state    *State
	progress *progress
	sem      chan struct{}
	// passed: new instances that passed the gates (not checked again).
	passed sync.Map
}

// New returns a roller.
func New(cloud Cloud, cluster Cluster, store Store, opts Options, log *slog.Logger) *Roller {
	if opts.Poll == 0 {
		opts.Poll = 2 * time.Second
	}
	if opts.GateTimeout == 0 {
		opts.GateTimeout = 15 * time.Minute
	}
	if opts.Drain.Timeout == 0 {
		opts.Drain.Timeout = 10 * time.Minute
	}
	if opts.LockTTL == 0 {
		opts.LockTTL = 5 * time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Roller{cloud: cloud, cluster: cluster, store: store, opts: opts, log: log, progress: newProgress(opts.Progress, opts.Clock)}
}

// Start begins a new rollout, or resumes the one in the store (a run that
// was killed, or paused). It returns when the rollout is done, paused,
// aborted or failed.
func (r *Roller) Start(ctx context.Context, clusterName string) (*State, error) {
	st, err := r.store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to read the rollout state: %w", err)
	}
	now := r.opts.Clock.Now()
	resumed := true
	switch {
	case st == nil || st.Status == StatusDone || st.Status == StatusAborted:
		resumed = false
		if r.opts.Image == "" && !r.opts.Relaunch {
			return nil, ErrNoRollout
		}
		st = &State{ID: fmt.Sprintf("r%d", now.Unix()), Cluster: clusterName, Image: r.opts.Image, Reason: r.opts.Reason, Status: StatusRunning, Groups: map[string]*GroupProgress{}, Started: now}
		budget := r.opts.Budget
		for name, s := range r.opts.Groups {
			if err := s.Validate(); err != nil {
				return nil, fmt.Errorf("group %s: %w", name, err)
			}
			if r.cluster == nil && !s.CloudOnly {
				return nil, fmt.Errorf("group %s: %w", name, ErrNoCluster)
			}
			st.Groups[name] = &GroupProgress{Name: name, Strategy: s}
			if r.opts.Budget == 0 {
				budget += s.batchSize()
			}
		}
		st.Budget = budget
	case st.Lock.Owner != r.opts.Owner && now.Before(st.Lock.Expires):
		return st, fmt.Errorf("%w: %s until %s", ErrLocked, st.Lock.Owner, st.Lock.Expires.Format(time.RFC3339))
	case st.Status == StatusAborting:
		st.Status = StatusAborted
	default:
		st.Status = StatusRunning
	}
	if r.cluster == nil {
		for name, g := range st.Groups {
			if !g.Strategy.CloudOnly && !g.Done {
				return st, fmt.Errorf("group %s: %w", name, ErrNoCluster)
			}
		}
	}
	r.state = st
	if st.Status == StatusAborted {
		// The history first: a run killed between the two writes
		// records the rollout again, in place of the first record.
		herr := record(ctx, r.store, st, now, r.opts.Owner)
		return st, errors.Join(herr, r.save(ctx))
	}
	if err := r.save(ctx); err != nil {
		return nil, err
	}
	r.started(st, resumed)
	r.sem = make(chan struct{}, max(st.Budget, 1))
	renewCtx, stopRenew := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() { defer close(renewed); r.renew(renewCtx) }()
	defer func() { stopRenew(); <-renewed }()

	err = r.phases(ctx, st)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return st, ctx.Err() // killed: the lock expires, the state stays
	case err != nil && errors.Is(err, ErrStopped):
		// paused or aborted: the status says which
		if st.Status == StatusAborting {
			st.Status = StatusAborted
		}
	case err != nil:
		st.Status, st.Message = StatusFailed, err.Error()
	default:
		st.Status = StatusDone
		for _, g := range st.Groups {
			if !g.Done {
				st.Status = StatusRunning
			}
		}
	}
	st.Lock = Lock{}
	herr := record(ctx, r.store, st, r.opts.Clock.Now(), r.opts.Owner)
	if serr := r.saveLocked(ctx); serr != nil {
		return st, errors.Join(err, herr, serr)
	}
	done, total := st.replaced()
	r.progress.printf("rollout %s %s: %d/%d nodes replaced", st.ID, st.Status, done, total)
	if errors.Is(err, ErrStopped) {
		err = nil
	}
	return st, errors.Join(err, herr)
}

// phases rolls the groups phase by phase, the groups of one phase in
// parallel; a phase that fails or stops ends the run.
func (r *Roller) phases(ctx context.Context, st *State) error {
	byPhase := map[int][]*GroupProgress{}
	for _, g := range st.Groups {
		byPhase[g.Strategy.Phase] = append(byPhase[g.Strategy.Phase], g)
	}
	for _, p := range slices.Sorted(maps.Keys(byPhase)) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for _, g := range byPhase[p] {
			wg.Go(func() {
				if err := r.group(ctx, g); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("group %s: %w", g.Name, err))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}

func (r *Roller) save(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.saveLocked(ctx)
}

func (r *Roller) saveLocked(ctx context.Context) error {
	st := r.state
	st.Updated = r.opts.Clock.Now()
	if st.Status == StatusRunning || st.Status == StatusAborting {
		st.Lock = Lock{Owner: r.opts.Owner, Expires: st.Updated.Add(r.opts.LockTTL)}
	}
	if err := r.store.Save(context.WithoutCancel(ctx), st); err != nil {
		return fmt.Errorf("failed to persist the rollout: %w", err)
	}
	return nil
}

// renew keeps the lock while a step takes long (a gate waiting for a node
// to boot, a drain held by a PDB): every third of its TTL it saves the
// state, taking in pause and abort requests as step does.
func (r *Roller) renew(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.opts.Clock.After(r.opts.LockTTL / 3):
		}
		r.mu.Lock()
		if stored, err := r.store.Load(ctx); err == nil && stored != nil && (stored.Status == StatusPaused || stored.Status == StatusAborting) {
			r.state.Status = stored.Status
		}
		if err := r.saveLocked(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("failed to renew the rollout's lock", "err", err)
		}
		r.mu.Unlock()
	}
}

// step persists progress and reports it; then it honours pause and abort
// requests made through the store since the last step.
func (r *Roller) step(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	if stored, err := r.store.Load(ctx); err == nil && stored != nil && (stored.Status == StatusPaused || stored.Status == StatusAborting) {
		r.state.Status = stored.Status
	}
	err := r.saveLocked(ctx)
	snapshot := r.snapshotLocked()
	status := r.state.Status
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if r.opts.OnStep != nil {
		r.opts.OnStep(snapshot)
	}
	if status == StatusPaused || status == StatusAborting {
		return fmt.Errorf("%w: %s", ErrStopped, status)
	}
	return nil
}

func (r *Roller) snapshotLocked() State {
	s := *r.state
	s.Groups = map[string]*GroupProgress{}
	for k, g := range r.state.Groups {
		c := *g
		c.Old, c.Replaced = slices.Clone(g.Old), slices.Clone(g.Replaced)
		if g.Batch != nil {
			b := *g.Batch
			b.Old, b.Drained = slices.Clone(g.Batch.Old), slices.Clone(g.Batch.Drained)
			c.Batch = &b
		}
		s.Groups[k] = &c
	}
	return s
}

// edit changes a group's progress under the lock.
func (r *Roller) edit(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn()
}

// group rolls one instance group to the end, or until stopped.
func (r *Roller) group(ctx context.Context, g *GroupProgress) error {
	if g.Done {
		return nil
	}
	if g.NewVersion == "" {
		img := "" // Relaunch: the group keeps its image
		if r.state.Image != "" {
			var err error
			if img, err = r.cloud.ResolveImage(ctx, r.state.Image); err != nil {
				return fmt.Errorf("failed to resolve image %s: %w", r.state.Image, err)
			}
		}
		ch, err := r.cloud.SetImage(ctx, g.Name, img)
		if err != nil {
			return fmt.Errorf("failed to set image %q on group %s: %w", img, g.Name, err)
		}
		next := ch.NewVersion
		insts, desired, err := r.cloud.Instances(ctx, g.Name)
		if err != nil {
			return fmt.Errorf("failed to list the instances of group %s: %w", g.Name, err)
		}
		old, err := outdated(ctx, r.cloud, insts, img, next, g.Strategy.ReplaceAll)
		if err != nil {
			return fmt.Errorf("failed to find the outdated instances of group %s: %w", g.Name, err)
		}
		r.edit(func() {
			g.ImageID, g.PrevVersion, g.PrevImage, g.NewVersion, g.Base = cmp.Or(img, ch.PrevImage), ch.PrevVersion, ch.PrevImage, next, desired
			g.Started = r.opts.Clock.Now()
			g.Old = old
		})
		if err := r.step(ctx); err != nil {
			return err
		}
		r.progress.printf("%s: %d nodes to replace in %d batches (launch template version %s -> %s)", g.Name, len(g.Old), batchCount(len(g.Old), g.Strategy), g.PrevVersion, g.NewVersion)
		// Old nodes take no new pods unless they must.
		for _, id := range g.Old {
			if g.Strategy.CloudOnly {
				break
			}
			if n, err := r.cluster.Node(ctx, id); err == nil && n != nil {
				if err := r.cluster.Taint(ctx, n, r.state.ID); err != nil {
					return fmt.Errorf("failed to taint node %s of group %s: %w", n.Name, g.Name, err)
				}
			}
		}
	}
	for {
		if g.Batch == nil {
			rest := g.remaining()
			if len(rest) == 0 {
				r.edit(func() { g.Done, g.Finished = true, r.opts.Clock.Now() })
				if err := r.step(ctx); err != nil {
					return err
				}
				r.progress.printf("%s: done, %d/%d replaced", g.Name, len(g.Replaced), len(g.Old))
				return nil
			}
			k := g.Strategy.batchSize()
			if g.Strategy.Canary && len(g.Replaced) == 0 {
				k = 1
			}
			k = min(k, len(rest))
			// Budget: one slot per surged node across all groups.
			for range k {
				select {
				case r.sem <- struct{}{}:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			_, desired, err := r.cloud.Instances(ctx, g.Name)
			if err != nil {
				r.release(k)
				return fmt.Errorf("failed to read the desired capacity of group %s: %w", g.Name, err)
			}
			r.edit(func() {
				n := batchCount(len(g.Replaced), g.Strategy) + 1
				if g.Strategy.inPlace() {
					// No surge: drain, replace in place, then gate.
					g.Batch = &Batch{N: n, Old: rest[:k], Desired: desired, Step: StepDrain, InPlace: true}
					return
				}
				g.Batch = &Batch{N: n, Old: rest[:k], Desired: desired + k, Step: StepSurge}
			})
			if err := r.step(ctx); err != nil {
				r.release(k)
				return err
			}
			r.progress.batch(g, "replacing %s", strings.Join(g.Batch.Old, ", "))
		} else {
			// Resumed mid-batch: take its budget slots again.
			for range len(g.Batch.Old) {
				r.sem <- struct{}{}
			}
		}
		err := r.batch(ctx, g)
		r.release(len(g.Batch.Old))
		if err != nil {
			return err
		}
		canary := g.Strategy.Canary && len(g.Replaced) == len(g.Batch.Old)
		batch := batchOf(g)
		r.edit(func() { g.Batch = nil })
		if canary && g.Strategy.PauseAfterCanary {
			r.edit(func() { r.state.Status = StatusPaused; r.state.Message = "paused after the canary of " + g.Name })
		}
		if err := r.step(ctx); err != nil {
			return err
		}
		r.mu.Lock()
		done, total := r.state.replaced()
		r.mu.Unlock()
		r.progress.printf("%s: batch %s done: %d/%d replaced (%d/%d in all)", g.Name, batch, len(g.Replaced), len(g.Old), done, total)
		if g.Strategy.BakeTime > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-r.opts.Clock.After(g.Strategy.BakeTime):
			}
		}
	}
}

func (r *Roller) release(k int) {
	for range k {
		<-r.sem
	}
}

// batch runs the current batch from its persisted step to the end.
func (r *Roller) batch(ctx context.Context, g *GroupProgress) error {
	b := g.Batch
	for {
		switch b.Step {
		case StepSurge:
			if err := r.cloud.SetDesired(ctx, g.Name, b.Desired); err != nil {
				return fmt.Errorf("failed to surge group %s to %d: %w", g.Name, b.Desired, err)
			}
			r.progress.batch(g, "surge: desired capacity %d", b.Desired)
			r.edit(func() { b.Step = StepGate })
		case StepGate:
			if err := r.gate(ctx, g); err != nil {
				return err
			}
			r.progress.batch(g, "new nodes passed the gates")
			if b.InPlace {
				return nil
			}
			r.edit(func() { b.Step = StepDrain })
		case StepDrain:
			for _, id := range b.Old {
				if slices.Contains(b.Drained, id) || g.Strategy.CloudOnly {
					continue // drained before a restart: not twice
				}
				n, err := r.cluster.Node(ctx, id)
				if err != nil {
					return fmt.Errorf("failed to find the node of instance %s: %w", id, err)
				}
				if n != nil {
					start := r.opts.Clock.Now()
					err := r.cluster.Drain(ctx, n, r.opts.Drain, func(pdb string) {
						r.edit(func() { g.Blocked = fmt.Sprintf("%s (for %s)", pdb, r.opts.Clock.Since(start).Round(time.Second)) })
						r.progress.drainBlocked(g, n.Name, pdb, start)
					})
					if err != nil {
						return fmt.Errorf("%w: node %s: %w", ErrDrain, n.Name, err)
					}
					r.progress.drained(n.Name)
					r.progress.batch(g, "drained %s", n.Name)
				}
				r.edit(func() { b.Drained = append(b.Drained, id); g.Blocked = "" })
				if err := r.step(ctx); err != nil {
					return err
				}
			}
			r.edit(func() { b.Step = StepTerminate })
		case StepTerminate:
			for _, id := range b.Old {
				if slices.Contains(g.Replaced, id) {
					continue
				}
				terminate := r.cloud.Terminate
				if b.InPlace {
					terminate = r.cloud.Replace
				}
				if err := terminate(ctx, g.Name, id); err != nil {
					return fmt.Errorf("failed to terminate instance %s of group %s: %w", id, g.Name, err)
				}
				r.progress.batch(g, "terminated %s", id)
				r.edit(func() { g.Replaced = append(g.Replaced, id) })
				if err := r.step(ctx); err != nil {
					return err
				}
			}
			if !b.InPlace {
				return nil
			}
			r.edit(func() { b.Step = StepGate })
		}
		if err := r.step(ctx); err != nil {
			return err
		}
	}
}

// gate waits until the group holds as many new instances as replaced so
// far plus this batch, each with a node passing every gate.
func (r *Roller) gate(ctx context.Context, g *GroupProgress) error {
	want := len(g.Batch.Old)
	for _, id := range g.Replaced {
		if !slices.Contains(g.Batch.Old, id) {
			want++
		}
	}
	deadline := r.opts.Clock.Now().Add(r.opts.GateTimeout)
	var why string
	for {
		insts, _, err := r.cloud.Instances(ctx, g.Name)
		if err != nil {
			return fmt.Errorf("failed to list the instances of group %s: %w", g.Name, err)
		}
		ready := 0
		var fresh []Instance
		for _, in := range insts {
			if in.Version == g.NewVersion && !slices.Contains(g.Old, in.ID) {
				fresh = append(fresh, in)
			}
		}
		why = fmt.Sprintf("%d of %d new instances launched", len(fresh), want)
		for _, in := range fresh {
			if _, ok := r.passed.Load(in.ID); ok {
				ready++
				continue
			}
			if g.Strategy.CloudOnly {
				if in.InService {
					ready++
				} else {
					why = "instance " + in.ID + " is not in service yet"
				}
				continue
			}
			n, err := r.cluster.Node(ctx, in.ID)
			if err != nil {
				return fmt.Errorf("failed to find the node of instance %s: %w", in.ID, err)
			}
			if n == nil {
				why = "instance " + in.ID + " has no node yet"
				continue
			}
			ok, reason, err := r.cluster.Ready(ctx, n)
			if err != nil {
				return fmt.Errorf("failed to read the readiness of node %s: %w", n.Name, err)
			}
			if ok {
				for _, check := range r.opts.Checks {
					if cerr := check(ctx, n); cerr != nil {
						ok, reason = false, cerr.Error()
						break
					}
				}
			}
			if ok {
				ready++
				r.passed.Store(in.ID, true)
			} else {
				why = "node " + n.Name + ": " + reason
			}
		}
		if ready >= want {
			return nil
		}
		if r.opts.Clock.Now().After(deadline) {
			return fmt.Errorf("%w after %s: %s (old nodes keep serving)", ErrGate, r.opts.GateTimeout, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.opts.Clock.After(r.opts.Poll):
		}
	}
}

// Request records a pause or abort request in the store; the running
// rollout honours it after its current step. An abort of a rollout that
// no run holds (paused, or its process gone and its lock expired at now)
// takes effect at once: there is no current step to finish, and a
// rollback may follow without a run to turn Aborting into Aborted.
func Request(ctx context.Context, store Store, status Status, now time.Time) (*State, error) {
	st, err := loadUnfinished(ctx, store)
	if err != nil {
		return st, err
	}
	st.Status = status
	if status == StatusAborting && !st.Held(now) {
		run := "abort request"
		if st.Lock.Owner != "" {
			run += " (last run " + st.Lock.Owner + ")"
		}
		st.Status, st.Lock = StatusAborted, Lock{}
		if err := record(ctx, store, st, now, run); err != nil {
			return st, errors.Join(err, store.Save(ctx, st))
		}
	}
	return st, store.Save(ctx, st)
}
