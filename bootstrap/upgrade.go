package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kops/pkg/apis/kops"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// Version-skew errors.
var (
	ErrDowngrade   = errors.New("downgrades are not supported")
	ErrSkipMinor   = errors.New("upgrades go one minor version at a time")
	ErrUnsupported = errors.New("unsupported Kubernetes version")
	ErrUpToDate    = errors.New("cluster is already at that version")
)

// UpgradeOptions extend ApplyOptions with the target version and how to roll.
type UpgradeOptions struct {
	ApplyOptions
	// To is the Kubernetes version to upgrade to, e.g. 1.36.1.
	To string
	// K8sClient, when set, lets the roll drain nodes and gate on them;
	// without it the roll is cloud-only.
	K8sClient kubernetes.Interface
	// Interval is the pause after each batch of a node group (default 0).
	Interval time.Duration
	// Roll says how to roll: the lock's owner, gates, drains, progress
	// (Groups, Relaunch and Reason are the upgrade's own).
	Roll rollout.Options
}

// CheckSkew enforces the upgrade rules: no downgrades, one minor at a time,
// a version this Trellis supports, and one every addon of def supports.
func CheckSkew(def *definition.ClusterDefinition, from, to string) error {
	fv, err := definition.ParseKubernetesVersion(from)
	if err != nil {
		return fmt.Errorf("stored cluster has an unparseable version %q: %w", from, err)
	}
	tv, err := definition.ParseKubernetesVersion(to)
	if err != nil {
		return fmt.Errorf("%w: %q is not a full version such as 1.36.1", ErrUnsupported, to)
	}
	if tv.LT(definition.MinKubernetesVersion) || tv.GT(definition.MaxKubernetesVersion) {
		return fmt.Errorf("%w: %s (this Trellis manages %d.%d to %d.%d)", ErrUnsupported, tv,
			definition.MinKubernetesVersion.Major, definition.MinKubernetesVersion.Minor,
			definition.MaxKubernetesVersion.Major, definition.MaxKubernetesVersion.Minor)
	}
	switch {
	case tv.EQ(fv):
		return fmt.Errorf("%w: %s", ErrUpToDate, tv)
	case tv.LT(fv):
		return fmt.Errorf("%w: %s -> %s", ErrDowngrade, fv, tv)
	case tv.Major != fv.Major || tv.Minor > fv.Minor+1:
		return fmt.Errorf("%w: %s -> %s skips a minor; upgrade to %d.%d.x first", ErrSkipMinor, fv, tv, fv.Major, fv.Minor+1)
	}
	if errs := definition.CheckAddonRange(def, field.NewPath("addons"), tv); len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrUnsupported, errs.ToAggregate())
	}
	return nil
}

// UpgradeResult is what an upgrade did or would do.
type UpgradeResult struct {
	From, To string
	Diff     *DiffResult
	// Rolled lists the instance groups rolled, control plane first.
	Rolled []string
	// Rollout is the roll's final state (also in the state store).
	Rollout *rollout.State
}

// ErrRolloutInProgress refuses an upgrade while another rollout of the
// cluster is unfinished.
var ErrRolloutInProgress = errors.New("a rollout of the cluster is unfinished")

// Upgrade moves a stored cluster to a new Kubernetes version: it checks
// version skew, prints the plan, and with Yes stores the new spec, applies it
// and rolls every instance group with the rollout engine, each
// control-plane group alone and in place, then the node groups with their
// definition's strategies. The roll is kept in the state store like an AMI
// rollout: the same command run again after a crash resumes it, and
// `trellis ami pause|resume|abort|status` work on it.
func Upgrade(ctx context.Context, def *definition.ClusterDefinition, opts UpgradeOptions) (*UpgradeResult, error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	t, err := prepareRoll(ctx, def, opts.ApplyOptions)
	if err != nil {
		return nil, err
	}
	p, from, store, inflight, name := t.p, t.from, t.store, t.inflight, t.p.Spec.Cluster.Name
	to, perr := definition.ParseKubernetesVersion(opts.To)
	res := &UpgradeResult{From: from, To: "v" + opts.To}
	if perr == nil {
		res.To = "v" + to.String()
	}
	reason := "upgrade to " + res.To
	if unfinished(inflight) {
		if inflight.Reason != reason || from != res.To {
			return nil, inProgress(inflight)
		}
		if !opts.Yes {
			fmt.Fprintf(out, "The roll of the upgrade to %s is %s (rollout %s): pass --yes to resume it.\n", res.To, inflight.Status, inflight.ID)
			return res, nil
		}
		fmt.Fprintf(out, "Resuming the roll of the upgrade to %s (rollout %s, %s).\n", res.To, inflight.ID, inflight.Status)
		return res, roll(ctx, p, def, opts, reason, store, res, nil)
	}
	if err := CheckSkew(def, from, opts.To); err != nil {
		return nil, err
	}
	next := *def
	next.KubernetesVersion = to.String()

	order := rollOrder(p.Spec.InstanceGroups)
	fmt.Fprintf(out, "Upgrade %s from %s to %s:\n", name, res.From, res.To)
	fmt.Fprintln(out, "  1. store the new spec and apply it (new launch template versions)")
	fmt.Fprintf(out, "  2. roll control-plane groups one at a time, in place: %v\n", order.controlPlane)
	fmt.Fprintf(out, "  3. then roll node groups with their strategies: %v\n", order.nodes)

	res.Diff, err = Update(ctx, &next, opts.ApplyOptions)
	if err != nil {
		return res, err
	}
	if !opts.Yes {
		fmt.Fprintln(out, "Dry run: pass --yes to upgrade.")
		return res, nil
	}
	if err := roll(ctx, p, def, opts, reason, store, res, nil); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "Upgraded %s to %s. Set kubernetesVersion: %s in the cluster definition.\n", name, res.To, to)
	return res, nil
}

type groupOrder struct{ controlPlane, nodes []string }

func rollOrder(igs []*kops.InstanceGroup) groupOrder {
	var o groupOrder
	for _, ig := range igs {
		if ig.IsControlPlane() {
			o.controlPlane = append(o.controlPlane, ig.Name)
		} else {
			o.nodes = append(o.nodes, ig.Name)
		}
	}
	return o
}
