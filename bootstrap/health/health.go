package health

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/config/manifests"
)

// Labels and namespaces validation reads.
const (
	// LabelInstanceGroup is the node label naming a node's instance group
	// (kops sets it; local clusters set it on the kind nodes).
	LabelInstanceGroup = "kops.k8s.io/instancegroup"
	// AddonNamespace is where Trellis addons run.
	AddonNamespace = "trellis-system"
)

// CriticalPriorityClasses mark pods whose readiness the cluster depends on.
var CriticalPriorityClasses = []string{"system-cluster-critical", "system-node-critical"}

// Group is the state of one instance group.
type Group struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	MinReady int    `json:"minReady"`
	Nodes    int    `json:"nodes"`
	Ready    int    `json:"ready"`
}

// Failure is one reason the cluster is not valid.
type Failure struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Message string `json:"message"`
}

// Result is a validation report.
type Result struct {
	Cluster  string    `json:"cluster"`
	Valid    bool      `json:"valid"`
	Groups   []Group   `json:"groups"`
	Failures []Failure `json:"failures"`
}

// Validate checks a cluster against its definition.
func Validate(ctx context.Context, c kubernetes.Interface, def *definition.ClusterDefinition) (*Result, error) {
	r := &Result{Cluster: def.Name, Failures: []Failure{}}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to list nodes: %w", err)
	}
	r.Groups = expectedGroups(def)
	byName := map[string]*Group{}
	for i := range r.Groups {
		byName[r.Groups[i].Name] = &r.Groups[i]
	}
	for _, n := range nodes.Items {
		ready := nodeReady(&n)
		g := byName[n.Labels[LabelInstanceGroup]]
		if g == nil {
			if !ready {
				r.fail("Node", n.Name, "node is not Ready (and belongs to no instance group of the definition)")
			}
			continue
		}
		g.Nodes++
		if ready {
			g.Ready++
		} else {
			r.fail("Node", n.Name, fmt.Sprintf("node of group %s is not Ready", g.Name))
		}
	}
	for _, g := range r.Groups {
		if g.Ready < g.MinReady {
			r.fail("InstanceGroup", g.Name, fmt.Sprintf("%d of at least %d nodes Ready", g.Ready, g.MinReady))
		}
	}

	pods, err := c.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to list kube-system pods: %w", err)
	}
	for _, p := range pods.Items {
		if !critical(&p) || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		if !podutils.IsPodReady(&p) {
			r.fail("Pod", "kube-system/"+p.Name, fmt.Sprintf("critical pod is not Ready (phase %s)", p.Status.Phase))
		}
	}

	for _, a := range def.Addons {
		if err := r.checkAddon(ctx, c, a.Name); err != nil {
			return nil, err
		}
	}
	sort.Slice(r.Failures, func(i, j int) bool {
		a, b := r.Failures[i], r.Failures[j]
		return a.Kind+a.Name < b.Kind+b.Name
	})
	r.Valid = len(r.Failures) == 0
	return r, nil
}

func (r *Result) fail(kind, name, msg string) {
	r.Failures = append(r.Failures, Failure{Kind: kind, Name: name, Message: msg})
}

// expectedGroups lists the definition's groups and how many nodes each needs
// Ready: control-plane groups one per zone (aws), node groups their minSize.
func expectedGroups(def *definition.ClusterDefinition) []Group {
	var gs []Group
	if def.Cloud == definition.CloudAWS {
		for _, z := range def.ControlPlane.Zones {
			gs = append(gs, Group{Name: render.ControlPlaneGroupPrefix + z, Role: string(definition.RoleControlPlane), MinReady: 1})
		}
	}
	for _, ig := range def.InstanceGroups {
		min := 0
		if ig.MinSize != nil {
			min = int(*ig.MinSize)
		}
		gs = append(gs, Group{Name: ig.Name, Role: string(ig.Role), MinReady: min})
	}
	return gs
}

// checkAddon looks for the addon's workload in trellis-system (named
// after it, or those the index names): a DaemonSet must be fully rolled
// out, a Deployment or StatefulSet fully available, a CronJob not
// suspended. Addons without a workload are checked by what they configure.
func (r *Result) checkAddon(ctx context.Context, c kubernetes.Interface, name string) error {
	a, _ := manifests.Lookup(name)
	if len(a.Workloads) > 0 {
		for _, w := range a.Workloads {
			if err := r.checkWorkload(ctx, c, name, w); err != nil {
				return err
			}
		}
		return nil
	}
	if len(a.FlowSchemas) > 0 {
		var missing []string
		defer func() {
			if len(missing) > 0 {
				r.fail("Addon", name, "not installed: no FlowSchema "+strings.Join(missing, ", "))
			}
		}()
		for _, fs := range a.FlowSchemas {
			got, err := c.FlowcontrolV1().FlowSchemas().Get(ctx, fs, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				missing = append(missing, fs)
				continue
			}
			if err != nil {
				return fmt.Errorf("failed to read addon %s: %w", name, err)
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == flowcontrolv1.FlowSchemaConditionDangling && cond.Status == flowcontrolv1.ConditionTrue {
					r.fail("Addon", name, fmt.Sprintf("FlowSchema %s is dangling: %s", fs, cond.Message))
				}
			}
		}
		return nil
	}
	return r.checkWorkload(ctx, c, name, name)
}

// checkWorkload checks the addon's workload called name, whatever its kind.
func (r *Result) checkWorkload(ctx context.Context, c kubernetes.Interface, addon, name string) error {
	what := ""
	if addon != name {
		what = name + ": "
	}
	ds, err := c.AppsV1().DaemonSets(AddonNamespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		if msg := daemonSetProblem(ds); msg != "" {
			r.fail("Addon", addon, what+msg)
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to read addon %s: %w", name, err)
	}
	dep, err := c.AppsV1().Deployments(AddonNamespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		if msg := deploymentProblem(dep); msg != "" {
			r.fail("Addon", addon, what+msg)
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to read addon %s: %w", name, err)
	}
	sts, err := c.AppsV1().StatefulSets(AddonNamespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		if sts.Status.ObservedGeneration < sts.Generation || sts.Status.ReadyReplicas < replicas(sts.Spec.Replicas) {
			r.fail("Addon", addon, what+fmt.Sprintf("statefulset %d of %d replicas ready", sts.Status.ReadyReplicas, replicas(sts.Spec.Replicas)))
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to read addon %s: %w", name, err)
	}
	cj, err := c.BatchV1().CronJobs(AddonNamespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
			r.fail("Addon", addon, what+"cronjob suspended")
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to read addon %s: %w", name, err)
	}
	r.fail("Addon", addon, fmt.Sprintf("not installed: no DaemonSet, Deployment, StatefulSet or CronJob %s/%s", AddonNamespace, name))
	return nil
}

func daemonSetProblem(ds *appsv1.DaemonSet) string {
	s := ds.Status
	switch {
	case s.ObservedGeneration < ds.Generation:
		return "daemonset rollout not observed yet"
	case s.DesiredNumberScheduled == 0:
		return "daemonset schedules no pods"
	case s.UpdatedNumberScheduled < s.DesiredNumberScheduled:
		return fmt.Sprintf("daemonset rollout: %d of %d pods updated", s.UpdatedNumberScheduled, s.DesiredNumberScheduled)
	case s.NumberReady < s.DesiredNumberScheduled:
		return fmt.Sprintf("daemonset %d of %d pods ready", s.NumberReady, s.DesiredNumberScheduled)
	}
	return ""
}

func deploymentProblem(d *appsv1.Deployment) string {
	want := replicas(d.Spec.Replicas)
	s := d.Status
	switch {
	case s.ObservedGeneration < d.Generation:
		return "deployment rollout not observed yet"
	case s.UpdatedReplicas < want:
		return fmt.Sprintf("deployment rollout: %d of %d replicas updated", s.UpdatedReplicas, want)
	case s.AvailableReplicas < want:
		return fmt.Sprintf("deployment %d of %d replicas available", s.AvailableReplicas, want)
	}
	return ""
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func critical(p *corev1.Pod) bool {
	for _, pc := range CriticalPriorityClasses {
		if p.Spec.PriorityClassName == pc {
			return true
		}
	}
	return p.Labels["tier"] == "control-plane"
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Print writes a human-readable report.
func (r *Result) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tROLE\tREADY\tNODES\tMIN")
	for _, g := range r.Groups {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", g.Name, g.Role, g.Ready, g.Nodes, g.MinReady)
	}
	tw.Flush()
	if r.Valid {
		fmt.Fprintf(w, "\nYour cluster %s is ready.\n", r.Cluster)
		return
	}
	fmt.Fprintf(w, "\nValidation failed (%d):\n", len(r.Failures))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tMESSAGE")
	for _, f := range r.Failures {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Kind, f.Name, strings.ReplaceAll(f.Message, "\t", " "))
	}
	tw.Flush()
}

// Write writes the report to w as output says: "json" (indented) or
// "table" (Print).
func (r *Result) Write(w io.Writer, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "table":
		r.Print(w)
		return nil
	default:
		return fmt.Errorf("unknown --output %q: use table or json", output)
	}
}
