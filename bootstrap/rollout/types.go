// Package rollout replaces the nodes of instance groups with a new machine
// image: a new launch-template version, then batches of surge -> health
// gates -> cordon and drain through the Eviction API -> terminate, groups in
// parallel within a global budget, a canary batch first. Progress is
// persisted after every step, so a killed run started again resumes where
// it was: no node drained twice, none skipped, no new instance terminated.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Errors.
var (
	ErrLocked    = errors.New("another rollout holds the lock")
	ErrGate      = errors.New("health gate failed")
	ErrDrain     = errors.New("drain failed")
	ErrStopped   = errors.New("rollout stopped")
	ErrNoRollout = errors.New("no rollout in progress")
	ErrNoCluster = errors.New("no Kubernetes cluster to drain and gate on: give one, or roll cloud-only")
)

// Status of a rollout.
type Status string

const (
	StatusRunning  Status = "Running"
	StatusPaused   Status = "Paused"   // at a checkpoint, or by `pause`
	StatusAborting Status = "Aborting" // `abort`: stop after the current step
	StatusAborted  Status = "Aborted"
	StatusFailed   Status = "Failed"
	StatusDone     Status = "Done"
)

// Step of a batch; each is persisted before the next begins.
type Step string

const (
	StepSurge     Step = "Surge"     // desired capacity raised
	StepGate      Step = "Gate"      // waiting for new nodes to pass the gates
	StepDrain     Step = "Drain"     // cordon and evict the batch's old nodes
	StepTerminate Step = "Terminate" // terminate them, decrementing capacity (in place: keeping it)
)

// Strategy of one instance group.
type Strategy struct {
	// MaxSurge new nodes per batch. 0 with MaxUnavailable > 0 replaces in
	// place: a batch of MaxUnavailable old nodes is drained and terminated
	// first, and the group launches their replacements at the same
	// capacity (for pools without spare capacity, such as GPU groups).
	MaxSurge int `json:"maxSurge"`
	// MaxUnavailable old nodes drained at once when MaxSurge is 0.
	MaxUnavailable int `json:"maxUnavailable,omitempty"`
	// Canary: the first batch is one node, and the rollout pauses after it
	// when PauseAfterCanary is set.
	Canary           bool `json:"canary"`
	PauseAfterCanary bool `json:"pauseAfterCanary,omitempty"`
	// BakeTime waits after each batch before the next.
	BakeTime time.Duration `json:"bakeTime,omitempty"`
	// Phase orders groups: every group of a lower phase is done before a
	// group of a higher phase starts (an upgrade rolls each control-plane
	// group alone, then the node groups together).
	Phase int `json:"phase,omitempty"`
	// CloudOnly rolls the group without Kubernetes, as kops's --cloudonly
	// does: no taint and no drain, and a new instance passes the gate when
	// the cloud reports it in service. For clusters whose API cannot be
	// reached, and for instances that are not nodes.
	CloudOnly bool `json:"cloudOnly,omitempty"`
	// ReplaceAll replaces every instance of the group, not only those
	// launched from an older launch-template version (a definition change
	// the launch template does not carry, such as the instance types of a
	// mixed-instances policy).
	ReplaceAll bool `json:"replaceAll,omitempty"`
}

func (s Strategy) inPlace() bool { return s.MaxSurge == 0 && s.MaxUnavailable > 0 }

// batchSize is the number of old nodes a batch replaces.
func (s Strategy) batchSize() int {
	if s.inPlace() {
		return s.MaxUnavailable
	}
	return max(s.MaxSurge, 1)
}

// Validate refuses a strategy that could never make progress.
func (s Strategy) Validate() error {
	switch {
	case s.MaxSurge < 0 || s.MaxUnavailable < 0:
		return fmt.Errorf("maxSurge %d and maxUnavailable %d must not be negative", s.MaxSurge, s.MaxUnavailable)
	case s.MaxSurge == 0 && s.MaxUnavailable == 0:
		return errors.New("maxSurge and maxUnavailable are both 0: no batch could replace a node")
	}
	return nil
}

// Options of a rollout.
type Options struct {
	// Image is the new image (ami-..., ssm:..., or owner/name), resolved
	// by the cloud.
	Image string
	// Relaunch, without an Image, replaces every instance not launched
	// from its group's newest launch-template version, images unchanged:
	// what a cluster upgrade needs once the new spec is applied.
	Relaunch bool
	// Reason says why, in the state and its status (e.g. "upgrade to
	// v1.36.1"); an AMI rollout leaves it empty.
	Reason string
	// Groups to roll, with their strategies.
	Groups map[string]Strategy
	// Budget caps surged nodes across all groups at once (0: the sum of
	// the groups' MaxSurge).
	Budget int
	// GateTimeout bounds the wait for new nodes to pass the gates.
	GateTimeout time.Duration
	// Drain settings.
	Drain DrainOptions
	// Owner identifies this run for the lock; LockTTL is how long the lock
	// outlives a run that stopped renewing it.
	Owner   string
	LockTTL time.Duration
	// Checks are custom gates run on each new node.
	Checks []func(ctx context.Context, node *corev1.Node) error
	// OnStep is called after every persisted step (tests check invariants).
	OnStep func(State)
	// Progress, when set, gets one line per step, each with the time
	// since the run began: every batch's nodes replaced of the total, and
	// the PDB a refused drain waits on (the CLI passes its output).
	Progress io.Writer
	// Poll is how often gates and drains are rechecked (default 2s).
	Poll time.Duration
	// Clock times the lock, gate timeouts, polls and bake times (default
	// the real clock; tests step a fake one).
	Clock clock.Clock
}

// DrainOptions control evictions.
type DrainOptions struct {
	Timeout     time.Duration // per node (default 10m)
	GracePeriod *int64        // eviction grace period (default: the pod's)
}

// Pod annotation with per-pod drain rules.
const (
	AnnotationDrain        = "trellis.dev/drain"
	DrainSkip              = "skip"                // never evicted (the node goes with it)
	DrainWaitForCompletion = "wait-for-completion" // let it finish, do not evict
	// TaintKey marks old nodes PreferNoSchedule at the start of a rollout.
	TaintKey = "trellis.dev/ami-rollout"
	// AnnotationRollout on nodes records the rollout and step.
	AnnotationRollout = "trellis.dev/ami-rollout"
)

// State is what is persisted (in the kops state store) after every step.
type State struct {
	ID      string                    `json:"id"`
	Cluster string                    `json:"cluster"`
	Image   string                    `json:"image"`
	Reason  string                    `json:"reason,omitempty"`
	Status  Status                    `json:"status"`
	Message string                    `json:"message,omitempty"`
	Budget  int                       `json:"budget"`
	Groups  map[string]*GroupProgress `json:"groups"`
	Lock    Lock                      `json:"lock"`
	Updated time.Time                 `json:"updated"`
	// Started is when the rollout began (absent in states written before
	// it was recorded: the history then takes the first group's start).
	Started time.Time `json:"started,omitzero"`
}

// Lock is held by the run making progress.
type Lock struct {
	Owner   string    `json:"owner"`
	Expires time.Time `json:"expires"`
}

// GroupProgress is one group's progress.
type GroupProgress struct {
	Name     string   `json:"name"`
	Strategy Strategy `json:"strategy"`
	// ImageID is the resolved image; PrevVersion the launch-template
	// version before the rollout (for --rollback).
	ImageID     string `json:"imageID,omitempty"`
	PrevVersion string `json:"prevVersion,omitempty"`
	PrevImage   string `json:"prevImage,omitempty"`
	NewVersion  string `json:"newVersion,omitempty"`
	// Old are the instances to replace, captured once; Replaced those
	// terminated so far.
	Old      []string `json:"old"`
	Replaced []string `json:"replaced"`
	// Base is the group's desired capacity before the rollout.
	Base  int    `json:"base"`
	Batch *Batch `json:"batch,omitempty"`
	Done  bool   `json:"done"`
	// Started and Finished time the group's part of the rollout.
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
	// Blocked names the PDBs that refused evictions, with for how long.
	Blocked string `json:"blocked,omitempty"`
}

// Batch is the batch in progress.
type Batch struct {
	N       int      `json:"n"`
	Old     []string `json:"old"`
	Desired int      `json:"desired"`
	Step    Step     `json:"step"`
	Drained []string `json:"drained,omitempty"`
	// InPlace batches run Drain, Terminate (capacity kept), Gate.
	InPlace bool `json:"inPlace,omitempty"`
}

func (g *GroupProgress) remaining() []string {
	done := map[string]bool{}
	for _, id := range g.Replaced {
		done[id] = true
	}
	if g.Batch != nil {
		for _, id := range g.Batch.Old {
			done[id] = true
		}
	}
	var out []string
	for _, id := range g.Old {
		if !done[id] {
			out = append(out, id)
		}
	}
	return out
}
