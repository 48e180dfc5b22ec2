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
	"k8s.io/kops/pkg/instancegroups"

	"github.com/trellis-dev/trellis/bootstrap/definition"
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
	// K8sClient, when set, lets the rolling update drain nodes and validate
	// the cluster between groups; without it the update is cloud-only.
	K8sClient kubernetes.Interface
	// Interval is the pause between instances in a group (default 0).
	Interval time.Duration
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
}

// Upgrade moves a stored cluster to a new Kubernetes version: it checks
// version skew, prints the plan, and with Yes stores the new spec, applies it
// and rolls every instance group, control plane before nodes.
func Upgrade(ctx context.Context, def *definition.ClusterDefinition, opts UpgradeOptions) (*UpgradeResult, error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	p, err := Prepare(ctx, def, opts.ApplyOptions)
	if err != nil {
		return nil, err
	}
	stored, err := Stored(ctx, p.Clientset, p.Spec.Cluster.Name)
	if err != nil {
		return nil, err
	}
	from := stored.Cluster.Spec.KubernetesVersion
	if err := CheckSkew(def, from, opts.To); err != nil {
		return nil, err
	}
	to, _ := definition.ParseKubernetesVersion(opts.To)
	next := *def
	next.KubernetesVersion = to.String()
	res := &UpgradeResult{From: from, To: "v" + to.String()}

	order := rollOrder(stored.InstanceGroups)
	fmt.Fprintf(out, "Upgrade %s from %s to %s:\n", p.Spec.Cluster.Name, res.From, res.To)
	fmt.Fprintln(out, "  1. store the new spec and apply it (new launch template versions)")
	fmt.Fprintf(out, "  2. roll control-plane groups one at a time: %v\n", order.controlPlane)
	fmt.Fprintf(out, "  3. then roll node groups: %v\n", order.nodes)

	res.Diff, err = Update(ctx, &next, opts.ApplyOptions)
	if err != nil {
		return res, err
	}
	if !opts.Yes {
		fmt.Fprintln(out, "Dry run: pass --yes to upgrade.")
		return res, nil
	}
	rolled, err := roll(ctx, p, opts)
	res.Rolled = rolled
	if err != nil {
		return res, err
	}
	fmt.Fprintf(out, "Upgraded %s to %s. Set kubernetesVersion: %s in the cluster definition.\n", p.Spec.Cluster.Name, res.To, to)
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

// roll runs kops's rolling update over every group of the cluster; kops
// rolls control-plane groups before node groups.
func roll(ctx context.Context, p *Prepared, opts UpgradeOptions) ([]string, error) {
	stored, err := Stored(ctx, p.Clientset, p.Spec.Cluster.Name)
	if err != nil {
		return nil, err
	}
	groups, err := p.Cloud.GetCloudGroups(stored.Cluster, stored.InstanceGroups, false, nil)
	if err != nil {
		return nil, fmt.Errorf("failed to list cloud groups of %s: %w", stored.Cluster.Name, err)
	}
	list := &kops.InstanceGroupList{}
	for _, ig := range stored.InstanceGroups {
		list.Items = append(list.Items, *ig)
	}
	ru := &instancegroups.RollingUpdateCluster{
		Clientset:         p.Clientset,
		Cluster:           stored.Cluster,
		Cloud:             p.Cloud,
		MasterInterval:    opts.Interval,
		NodeInterval:      opts.Interval,
		BastionInterval:   opts.Interval,
		K8sClient:         opts.K8sClient,
		CloudOnly:         opts.K8sClient == nil,
		ClusterName:       stored.Cluster.Name,
		FailOnDrainError:  true,
		FailOnValidate:    true,
		ValidationTimeout: 15 * time.Minute,
		DrainTimeout:      15 * time.Minute,
	}
	ru.Options.InitDefaults()
	if err := ru.RollingUpdate(ctx, groups, list); err != nil {
		return nil, fmt.Errorf("rolling update of %s failed: %w", stored.Cluster.Name, err)
	}
	o := rollOrder(stored.InstanceGroups)
	return append(o.controlPlane, o.nodes...), nil
}
