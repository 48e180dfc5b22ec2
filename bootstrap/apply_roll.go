package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// ErrVersionChange refuses a Kubernetes version change outside Upgrade,
// where the skew rules and the control plane's order hold.
var ErrVersionChange = errors.New("the definition changes kubernetesVersion: use `trellis cluster upgrade --to`")

// ChangeReason is the reason of the roll that follows a definition change.
const ChangeReason = "definition change"

// ApplyAndRoll brings a stored cluster to its changed definition: the spec diff and
// the cloud plan, and with Yes the new specs stored and applied (new
// launch-template versions where a group's instances change: machine types,
// root volume, metadata options ...), then the rollout engine relaunches, as
// Upgrade rolls (control plane alone and in place, then the node groups
// with their strategies), every instance of a group whose spec changed and
// every instance not on its group's newest launch template. Groups the
// change leaves alone have nothing to replace. An unfinished rollout of the
// cluster refuses it, except its own, which the same command resumes.
func ApplyAndRoll(ctx context.Context, def *definition.ClusterDefinition, opts UpgradeOptions) (*UpgradeResult, error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	t, err := prepareRoll(ctx, def, opts.ApplyOptions)
	if err != nil {
		return nil, err
	}
	p, store, inflight, name := t.p, t.store, t.inflight, t.p.Spec.Cluster.Name
	res := &UpgradeResult{From: t.from, To: p.Spec.Cluster.Spec.KubernetesVersion}
	if res.From != res.To {
		return nil, fmt.Errorf("%w (%s -> %s)", ErrVersionChange, res.From, res.To)
	}
	if unfinished(inflight) {
		if inflight.Reason != ChangeReason {
			return nil, inProgress(inflight)
		}
		if !opts.Yes {
			fmt.Fprintf(out, "The roll of a definition change is %s (rollout %s): pass --yes to resume it.\n", inflight.Status, inflight.ID)
			return res, nil
		}
		fmt.Fprintf(out, "Resuming the roll of a definition change (rollout %s, %s).\n", inflight.ID, inflight.Status)
		return res, roll(ctx, p, def, opts, ChangeReason, store, res, nil)
	}
	if res.Diff, err = Update(ctx, def, opts.ApplyOptions); err != nil {
		return res, err
	}
	if !opts.Yes {
		fmt.Fprintln(out, "Dry run: pass --yes to store, apply and roll the changed groups.")
		return res, nil
	}
	// A group whose spec changed is rolled whole: not every change reaches
	// its launch template (a mixed-instances policy's types are the group's).
	changed := map[string]bool{}
	for _, c := range res.Diff.Changes {
		if g, ok := strings.CutPrefix(c.Object, "instancegroup/"); ok && c.Path != "" {
			changed[g] = true
		}
	}
	if err := roll(ctx, p, def, opts, ChangeReason, store, res, changed); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "Applied %s; every instance is on its group's newest launch template.\n", name)
	return res, nil
}

func unfinished(st *rollout.State) bool {
	return st != nil && st.Status != rollout.StatusDone && st.Status != rollout.StatusAborted
}

func inProgress(st *rollout.State) error {
	what := st.Reason
	if what == "" {
		what = "image " + st.Image
	}
	return fmt.Errorf("%w: rollout %s (%s) is %s; finish it with `trellis ami resume` or stop it with `trellis ami abort` first",
		ErrRolloutInProgress, st.ID, what, st.Status)
}
