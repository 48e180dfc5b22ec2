package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/pkg/apis/kops/registry"
	"k8s.io/kops/pkg/apis/kops/validation"
	"k8s.io/kops/pkg/assets"
	"k8s.io/kops/pkg/client/simple"
	"k8s.io/kops/upup/pkg/fi"
	"k8s.io/kops/upup/pkg/fi/cloudup"
	"k8s.io/kops/upup/pkg/fi/cloudup/awsup"
	"k8s.io/kops/util/pkg/vfs"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
)

// Targets kops can apply to.
const (
	TargetDirect    = cloudup.TargetDirect
	TargetDryRun    = cloudup.TargetDryRun
	TargetTerraform = cloudup.TargetTerraform
)

// ErrClusterExists is returned by Create when the state store already holds
// the cluster.
var ErrClusterExists = errors.New("cluster already exists in the state store")

// ErrClusterNotFound is returned when the state store does not hold the cluster.
var ErrClusterNotFound = errors.New("cluster not found in the state store")

// ApplyOptions say where a cluster's specs live and how to apply them.
type ApplyOptions struct {
	// StateStore is the kops state store URL (s3://, file://, memfs://).
	StateStore string
	// Yes applies; without it only a dry-run plan is computed.
	Yes bool
	// Target is direct (default) or terraform.
	Target cloudup.Target
	// OutDir receives terraform output.
	OutDir string
	// Out receives the plan and progress.
	Out io.Writer
	// Cloud overrides the cloud kops builds from the spec (the AWS fake).
	Cloud fi.Cloud
	// TaskTimeout bounds how long kops retries one failing cloud task
	// before the apply fails (default kops's 10m). It bounds each task, not
	// the apply: tasks that depend on each other can each take it.
	TaskTimeout time.Duration
	// Progress is how often a running apply prints each task that is still
	// failing with its last error (default 30s; negative: never). Only
	// when kops's warnings are not already shown (klog at verbosity 0).
	Progress time.Duration
	// StopGrace is how long an apply whose context was cancelled (SIGINT,
	// SIGTERM) waits for kops to return before it gives up on it and the
	// state store is restored (default 3s).
	StopGrace time.Duration
	// SpecsOnly stores the specs without planning or applying them in the
	// cloud (no credentials: a later diff or upgrade shows the plan).
	SpecsOnly bool
}

func (o *ApplyOptions) target() cloudup.Target {
	switch {
	case o.Target == TargetTerraform:
		return TargetTerraform
	case !o.Yes:
		return TargetDryRun
	default:
		return TargetDirect
	}
}

// Plan is what an apply did or would do.
type Plan struct {
	// Changes reports whether the cloud differs from the spec (dry runs).
	Changes bool
	// Target is the kops target that ran.
	Target cloudup.Target
}

// Prepared is a rendered, fully validated cluster ready to be written.
type Prepared struct {
	Spec      *render.Spec
	Clientset simple.Clientset
	Cloud     fi.Cloud
}

// Prepare renders a definition and validates it as far as kops can before
// anything is written: kops's own validation, then the strict validation of
// the populated spec that kops runs on create.
func Prepare(ctx context.Context, def *definition.ClusterDefinition, opts ApplyOptions) (*Prepared, error) {
	spec, err := render.ToKops(def)
	if err != nil {
		return nil, err
	}
	if err := render.Validate(spec, false, nil); err != nil {
		return nil, err
	}
	cs, err := statestore.Open(ctx, opts.StateStore)
	if err != nil {
		return nil, err
	}
	c := spec.Cluster
	base, err := cs.ConfigBaseFor(c)
	if err != nil {
		return nil, fmt.Errorf("failed to compute config base for %s: %w", c.Name, err)
	}
	c.Spec.ConfigStore.Base = base.Path()
	// Trellis nodes are reached through SSM, not SSH keys.
	c.Spec.SSHKeyName = new("")
	if opts.SpecsOnly && opts.Cloud == nil {
		// No credentials and nothing standing in for AWS: the checks that
		// populate the spec from a cloud are left to the plan that has one.
		return &Prepared{Spec: spec, Clientset: cs}, nil
	}
	cloud := opts.Cloud
	if cloud == nil {
		if cloud, err = cloudup.BuildCloud(c); err != nil {
			return nil, fmt.Errorf("failed to build cloud for %s: %w", c.Name, err)
		}
		cloud = withCodes(cloud)
		if a, ok := cloud.(awsup.AWSCloud); ok {
			if err := checkImages(spec.InstanceGroups, a); err != nil {
				return nil, fmt.Errorf("%s: %w", c.Name, err)
			}
		}
	}
	if err := cloudup.PerformAssignments(c, vfs.Context, cloud); err != nil {
		return nil, fmt.Errorf("failed to populate %s: %w", c.Name, err)
	}
	ab := assets.NewAssetBuilder(vfs.Context, c.Spec.Assets, false)
	full, err := cloudup.PopulateClusterSpec(ctx, cs, c, spec.InstanceGroups, cloud, ab)
	if err != nil {
		return nil, fmt.Errorf("kops rejected cluster %s: %w", c.Name, err)
	}
	if err := validation.DeepValidate(full, spec.InstanceGroups, true, vfs.Context, cloud); err != nil {
		return nil, fmt.Errorf("kops rejected cluster %s (strict): %w", c.Name, err)
	}
	return &Prepared{Spec: spec, Clientset: cs, Cloud: cloud}, nil
}

// ErrPlanWrote is returned when a plan (create without Yes) found the
// state store changed after kops's dry run: a plan must write nothing.
var ErrPlanWrote = errors.New("the plan wrote to the state store")

// Create validates a definition and, with Yes, writes its specs to the
// state store and applies them through kops. Without Yes it is a plan, as
// Terraform's plan and `kops update cluster` without --yes are: kops's dry
// run against the cloud, and nothing written anywhere (no spec, no key),
// so `create --yes` can follow it. Any failure of a real apply restores
// the cluster's folder in the state store byte for byte (kops's files and
// Trellis's own), so the same command can simply be run again: kops adopts
// the cloud resources a failed apply already created.
func Create(ctx context.Context, def *definition.ClusterDefinition, opts ApplyOptions) (*Plan, error) {
	p, err := Prepare(ctx, def, opts)
	if err != nil {
		return nil, err
	}
	c := p.Spec.Cluster
	existing, err := getCluster(ctx, p.Clientset, c.Name)
	if err != nil && !errors.Is(err, ErrClusterNotFound) {
		return nil, err
	}
	if existing != nil {
		return nil, fmt.Errorf("%s: %w (change it with `trellis cluster update`, or `upgrade` for a new Kubernetes version)", c.Name, ErrClusterExists)
	}
	snap, err := statestore.Take(ctx, opts.StateStore, c.Name)
	if err != nil {
		return nil, err
	}
	if opts.target() == TargetDryRun {
		return planOnly(ctx, p, opts, snap)
	}
	if err := registry.CreateClusterConfig(ctx, p.Clientset, c, p.Spec.InstanceGroups, nil); err != nil {
		return nil, undo(ctx, snap, fmt.Errorf("failed to write %s to the state store: %w", c.Name, err))
	}
	// The pod-identity root lives beside the specs; an existing one (a
	// re-created cluster) is kept so workloads' trust survives.
	if _, created, err := statestore.EnsureIdentityRoot(ctx, opts.StateStore, c.Name, def.Runtime.TrustDomain); err != nil {
		return nil, undo(ctx, snap, fmt.Errorf("failed to create the identity root CA of %s: %w", c.Name, err))
	} else if created && opts.Out != nil {
		fmt.Fprintf(opts.Out, "Created the pod-identity root CA of %s in the state store\n", c.Name)
	}
	plan, err := apply(ctx, p, opts)
	if err != nil {
		return nil, undo(ctx, snap, err)
	}
	return plan, nil
}

// planOnly runs kops's dry run for a cluster the state store does not hold yet
// and checks that it wrote nothing there (restoring it if it did).
func planOnly(ctx context.Context, p *Prepared, opts ApplyOptions, snap *statestore.Snapshot) (*Plan, error) {
	if opts.SpecsOnly {
		return &Plan{Target: TargetDryRun}, nil
	}
	pl, err := apply(ctx, p, opts)
	changed, cerr := snap.Changed(ctx)
	switch {
	case cerr != nil:
		return nil, errors.Join(err, cerr)
	case len(changed) > 0:
		return nil, undo(ctx, snap, errors.Join(err, fmt.Errorf("%w: %v", ErrPlanWrote, changed)))
	case err != nil:
		return nil, err
	}
	return pl, nil
}

// undo restores the state store after err and says so.
func undo(ctx context.Context, snap *statestore.Snapshot, err error) error {
	// The restore must run even when the command's context was cancelled.
	ctx = context.WithoutCancel(ctx)
	if rerr := snap.Restore(ctx); rerr != nil {
		return errors.Join(err, rerr)
	}
	return fmt.Errorf("%w (the state store was restored as it was)", err)
}

// getCluster reads a cluster from the state store; ErrClusterNotFound when absent.
func getCluster(ctx context.Context, cs simple.Clientset, name string) (*kops.Cluster, error) {
	c, err := cs.GetCluster(ctx, name)
	if apierrors.IsNotFound(err) || (err == nil && c == nil) {
		return nil, fmt.Errorf("%s: %w", name, ErrClusterNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read %s from the state store: %w", name, err)
	}
	return c, nil
}

// PrintCreated tells w what a Create of def with opts did (p is its
// result) and what to run next; file is the definition's file.
func (p *Plan) PrintCreated(w io.Writer, def *definition.ClusterDefinition, opts ApplyOptions, file string) {
	name := render.ClusterName(def)
	next := fmt.Sprintf("trellis cluster create -f %s --state %s --yes", file, opts.StateStore)
	switch {
	case opts.SpecsOnly:
		fmt.Fprintf(w, "Validated %s; cloud plan skipped (no AWS credentials). Nothing was written.\nWith credentials, run `%s` to see the plan.\n", name,
			strings.TrimSuffix(next, " --yes"))
	case p.Target == TargetDryRun:
		fmt.Fprintf(w, "Plan only: nothing was written to the state store or the cloud.\nTo create %s, run:\n  %s\n", name, next)
	case p.Target == TargetTerraform:
		fmt.Fprintf(w, "Stored cluster %s in %s.\nTerraform written.\n", name, opts.StateStore)
	default:
		fmt.Fprintf(w, "Stored cluster %s in %s.\nCluster %s applied.\nNext: `trellis cluster kubeconfig -f %s --admin 1h` for a kubeconfig.\n", name, opts.StateStore, name, file)
	}
}
