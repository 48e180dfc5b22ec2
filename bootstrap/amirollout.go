package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kops/upup/pkg/fi/cloudup/awsup"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/health"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
)

// AMIRolloutOptions are a rollout of instance groups onto a new image, as
// `trellis ami rollout` and `trellis ami resume` take them.
type AMIRolloutOptions struct {
	// StateStore holds the cluster's specs and the rollout's state (Store).
	StateStore string
	Store      *rollout.VFSStore
	// Image is the new image; empty with Rollback false resumes the
	// rollout the store holds.
	Image    string
	Rollback bool
	// Overrides of the groups' strategies; Budget, the gate and drain
	// timeouts and the lock's TTL go to the engine as they are.
	Overrides                 StrategyOverrides
	Budget                    int
	GateTimeout, DrainTimeout time.Duration
	// DrainGrace is the eviction grace period in seconds (-1: each pod's
	// own).
	DrainGrace int
	LockTTL    time.Duration
	// Gates beside the built-in ones: HTTP and command checks and cluster
	// validation, each attempt bounded by CheckTimeout.
	HTTPChecks, CommandChecks []string
	CheckTimeout              time.Duration
	Validate                  bool
	// CloudOnly rolls without Kubernetes (kops's --cloudonly).
	CloudOnly bool
	// Yes runs the rollout; without it a new rollout is planned and
	// printed, and nothing changes.
	Yes bool
	// Kube returns the cluster's client. A plan reads the cluster's
	// PodDisruptionBudgets only with PlanBudgets (a kubeconfig was given).
	Kube        func() (kubernetes.Interface, error)
	PlanBudgets bool
	// DefinitionFile names the definition in errors about it.
	DefinitionFile string
	// Owner names this run in the rollout's lock.
	Owner string
	Out   io.Writer
}

// RolloutAMI plans, runs, resumes or rolls back a rollout of the cluster
// name's instance groups onto a new image.
func RolloutAMI(ctx context.Context, def *definition.ClusterDefinition, name string, o AMIRolloutOptions) error {
	resume := o.Image == "" && !o.Rollback
	var prev *rollout.State
	if o.Rollback {
		rb, err := rollout.RollbackTarget(ctx, o.Store)
		if err != nil {
			return err
		}
		o.Image, o.Overrides.Groups, prev = rb.Image, rb.Groups, rb.Prev
	}
	groups, err := Strategies(def, o.Overrides)
	if err != nil {
		return fmt.Errorf("%s: %w", o.DefinitionFile, err)
	}
	cloudOnly, err := o.cloudOnly(ctx, resume)
	if err != nil {
		return err
	}
	for g, st := range groups {
		st.CloudOnly = cloudOnly
		groups[g] = st
	}
	awsCloud, err := o.cloud(ctx, def, name, groups)
	if err != nil {
		return err
	}
	opts := rollout.Options{
		Image: o.Image, Groups: groups, Budget: o.Budget, GateTimeout: o.GateTimeout, Drain: rollout.DrainOptions{Timeout: o.DrainTimeout}, LockTTL: o.LockTTL,
		Progress: o.Out, Owner: o.Owner,
	}
	if o.DrainGrace >= 0 {
		opts.Drain.GracePeriod = new(int64(o.DrainGrace))
	}
	if !o.Yes && !resume {
		return o.plan(ctx, awsCloud, opts)
	}
	if prev != nil {
		// A finished state makes room for the rollback rollout.
		prev.Status = rollout.StatusDone
		if err := o.Store.Save(ctx, prev); err != nil {
			return fmt.Errorf("failed to close rollout %s for its rollback: %w", prev.ID, err)
		}
		fmt.Fprintf(o.Out, "Rolling %s back onto %s\n", strings.Join(o.Overrides.Groups, ", "), o.Image)
	}
	var cluster rollout.Cluster
	if !cloudOnly {
		kc, err := o.Kube()
		if err != nil {
			return err
		}
		if cluster, err = rollout.NewKubeCluster(ctx, kc); err != nil {
			return fmt.Errorf("failed to watch the cluster's nodes and budgets: %w", err)
		}
		opts.Checks = o.checks(kc, def)
	}
	st, err := rollout.New(awsCloud, cluster, o.Store, opts, nil).Start(ctx, name)
	if st != nil {
		st.Print(o.Out)
	}
	return err
}

// cloud is the cluster's AWS cloud as the engine drives it, with the new
// image resolved and checked against the groups' architectures.
func (o AMIRolloutOptions) cloud(ctx context.Context, def *definition.ClusterDefinition, name string, groups map[string]rollout.Strategy) (*rollout.AWSCloud, error) {
	cloud, err := awsup.NewAWSCloud(def.Region, map[string]string{awsup.TagClusterName: name})
	if err != nil {
		return nil, fmt.Errorf("failed to reach AWS: %w", err)
	}
	cs, err := statestore.Open(ctx, o.StateStore)
	if err != nil {
		return nil, err
	}
	if o.Image != "" {
		img, err := cloud.ResolveImage(o.Image)
		if err != nil {
			return nil, fmt.Errorf("failed to resolve image %q: %w", o.Image, err)
		}
		if err := CheckImageArchitecture(def, slices.Collect(maps.Keys(groups)), o.Image, string(img.Architecture)); err != nil {
			return nil, fmt.Errorf("%s: %w", o.DefinitionFile, err)
		}
	}
	return &rollout.AWSCloud{AWS: cloud, Cluster: name, Clientset: cs}, nil
}

// plan prints what the rollout would do, with the cluster's
// PodDisruptionBudgets when there is a cluster to read them from.
func (o AMIRolloutOptions) plan(ctx context.Context, cloud rollout.Cloud, opts rollout.Options) error {
	var pdbs rollout.Constraints
	if o.PlanBudgets {
		kc, err := o.Kube()
		if err != nil {
			return err
		}
		if pdbs, err = rollout.NewKubeCluster(ctx, kc); err != nil {
			return fmt.Errorf("failed to read the cluster's disruption budgets: %w", err)
		}
	}
	plan, err := rollout.MakePlan(ctx, cloud, pdbs, opts)
	if err != nil {
		return err
	}
	plan.Print(o.Out)
	fmt.Fprintln(o.Out, "Nothing changed. Pass --yes to start the rollout.")
	return nil
}

// cloudOnly says whether this run rolls without Kubernetes: CloudOnly, or
// resuming a rollout whose groups all roll cloud-only. Gates that look at
// nodes cannot go with it.
func (o AMIRolloutOptions) cloudOnly(ctx context.Context, resume bool) (bool, error) {
	only := o.CloudOnly
	if resume && !only {
		st, err := o.Store.Load(ctx)
		if err != nil {
			return false, fmt.Errorf("failed to read the rollout to resume: %w", err)
		}
		if st != nil && len(st.Groups) > 0 {
			only = true
			for _, g := range st.Groups {
				only = only && (g.Strategy.CloudOnly || g.Done)
			}
		}
	}
	if only && (len(o.HTTPChecks) > 0 || len(o.CommandChecks) > 0 || o.Validate) {
		return false, errors.New("--check-http, --check-command and --validate-cluster gate on nodes: a cloud-only rollout has none")
	}
	return only, nil
}

// checks are the custom gates the options ask for.
func (o AMIRolloutOptions) checks(kc kubernetes.Interface, def *definition.ClusterDefinition) []rollout.Check {
	var out []rollout.Check
	for _, u := range o.HTTPChecks {
		out = append(out, rollout.HTTPCheck(u, o.CheckTimeout))
	}
	for _, c := range o.CommandChecks {
		out = append(out, rollout.CommandCheck(c, o.CheckTimeout))
	}
	if o.Validate {
		out = append(out, ValidateCheck(kc, def))
	}
	return out
}

// ValidateCheck is `trellis cluster validate` as a gate.
func ValidateCheck(kc kubernetes.Interface, def *definition.ClusterDefinition) rollout.Check {
	return func(ctx context.Context, _ *corev1.Node) error {
		res, err := health.Validate(ctx, kc, def)
		if err != nil {
			return fmt.Errorf("cluster validation: %w", err)
		}
		if !res.Valid {
			f := res.Failures[0]
			return fmt.Errorf("cluster validation: %s %s: %s (%d failures)", f.Kind, f.Name, f.Message, len(res.Failures))
		}
		return nil
	}
}
