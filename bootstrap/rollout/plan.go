package rollout

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// BatchEstimate is the time one batch is assumed to take in a plan's
// estimate: a new node's boot and gates (3m) and a drain (1m).
const BatchEstimate = 4 * time.Minute

// Plan is what a rollout would do, computed without changing anything.
type Plan struct {
	Image   string
	ImageID string
	Budget  int
	Groups  []GroupPlan
	// Estimate assumes BatchEstimate per batch, groups in parallel within
	// the budget.
	Estimate time.Duration
}

// GroupPlan is one group's part of a plan.
type GroupPlan struct {
	Name     string
	Strategy Strategy
	// Replace are the instances to replace (those not on the image).
	Replace []string
	Batches int
	// PDBs are the budgets selecting pods on those nodes, with the
	// disruptions each allows now.
	PDBs []string
}

// Constraints finds what limits draining nodes (KubeCluster).
type Constraints interface {
	PDBsOn(ctx context.Context, instanceIDs []string) ([]string, error)
}

// MakePlan resolves the image and lists, per group, the nodes a rollout
// with opts would replace, its batches and the PDBs in its way. kube may be
// nil (no cluster access: PDBs unknown).
func MakePlan(ctx context.Context, cloud Cloud, kube Constraints, opts Options) (*Plan, error) {
	id, err := cloud.ResolveImage(ctx, opts.Image)
	if err != nil {
		return nil, err
	}
	p := &Plan{Image: opts.Image, ImageID: id, Budget: opts.Budget}
	totalBatches, budget := 0, 0
	names := make([]string, 0, len(opts.Groups))
	for name := range opts.Groups {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := opts.Groups[name]
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("group %s: %w", name, err)
		}
		insts, _, err := cloud.Instances(ctx, name)
		if err != nil {
			return nil, err
		}
		g := GroupPlan{Name: name, Strategy: s}
		if g.Replace, err = outdated(ctx, cloud, insts, id, "", s.ReplaceAll); err != nil {
			return nil, err
		}
		g.Batches = batchCount(len(g.Replace), s)
		if kube != nil {
			if g.PDBs, err = kube.PDBsOn(ctx, g.Replace); err != nil {
				return nil, err
			}
		}
		totalBatches += g.Batches
		budget += s.batchSize()
		p.Groups = append(p.Groups, g)
	}
	if p.Budget == 0 {
		p.Budget = budget
	}
	// Groups run in parallel: as many batches at once as the budget holds
	// batches of the average size.
	parallel := max(1, min(len(p.Groups), p.Budget*len(p.Groups)/max(budget, 1)))
	p.Estimate = time.Duration((totalBatches+parallel-1)/parallel) * BatchEstimate
	return p, nil
}

// Print writes the plan as a table.
func (p *Plan) Print(w io.Writer) {
	fmt.Fprintf(w, "Rollout plan: image %s (%s), budget %d node(s) at once\n", p.Image, p.ImageID, p.Budget)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tNODES\tSTRATEGY\tBATCHES\tPDBS")
	for _, g := range p.Groups {
		strategy := fmt.Sprintf("surge %d", g.Strategy.MaxSurge)
		if g.Strategy.inPlace() {
			strategy = fmt.Sprintf("in place, %d unavailable", g.Strategy.MaxUnavailable)
		}
		if g.Strategy.Canary {
			strategy += ", canary"
		}
		pdbs := strings.Join(g.PDBs, ", ")
		if pdbs == "" {
			pdbs = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\n", g.Name, len(g.Replace), strategy, g.Batches, pdbs)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "Estimate: about %s (%s per batch: boot, gates, drain).\n", p.Estimate, BatchEstimate)
}

// PDBsOn names the PodDisruptionBudgets selecting pods on the instances'
// nodes, with the disruptions each allows now.
func (k *KubeCluster) PDBsOn(ctx context.Context, instanceIDs []string) ([]string, error) {
	found := map[string]string{}
	// One list of PDBs per namespace, not one per pod.
	byNamespace := map[string][]policyv1.PodDisruptionBudget{}
	for _, id := range instanceIDs {
		n, err := k.Node(ctx, id)
		if err != nil || n == nil {
			continue
		}
		pods, err := k.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name).String()})
		if err != nil {
			return nil, fmt.Errorf("failed to list pods on %s: %w", n.Name, err)
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if skipDrain(pod) || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				continue
			}
			pdbs, ok := byNamespace[pod.Namespace]
			if !ok {
				list, err := k.Client.PolicyV1().PodDisruptionBudgets(pod.Namespace).List(ctx, metav1.ListOptions{})
				if err != nil {
					return nil, fmt.Errorf("failed to list PDBs in %s: %w", pod.Namespace, err)
				}
				pdbs = list.Items
				byNamespace[pod.Namespace] = pdbs
			}
			for _, pdb := range pdbs {
				sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
				if err == nil && sel.Matches(labels.Set(pod.Labels)) {
					found[pod.Namespace+"/"+pdb.Name] = fmt.Sprintf("%s/%s (allows %d)", pod.Namespace, pdb.Name, pdb.Status.DisruptionsAllowed)
				}
			}
		}
	}
	out := make([]string, 0, len(found))
	for _, v := range found {
		out = append(out, v)
	}
	sort.Strings(out)
	return out, nil
}
