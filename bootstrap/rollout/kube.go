package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/clock"
)

const instanceIndex = "instance"

// KubeCluster is Cluster on a Kubernetes API: nodes from one informer
// (found by the instance id in spec.providerID), evictions through the
// Eviction API so PodDisruptionBudgets are honoured by the apiserver.
type KubeCluster struct {
	Client kubernetes.Interface
	// RuntimeNamespaces hold the DaemonSets every node must run Ready
	// before it counts (default trellis-system and kube-system).
	RuntimeNamespaces []string
	// Clock times drains (the real clock from NewKubeCluster).
	Clock clock.Clock
	nodes cache.SharedIndexInformer
}

// NewKubeCluster starts a node informer until ctx ends.
func NewKubeCluster(ctx context.Context, client kubernetes.Interface) (*KubeCluster, error) {
	f := informers.NewSharedInformerFactory(client, 0)
	inf := f.Core().V1().Nodes().Informer()
	if err := inf.AddIndexers(cache.Indexers{instanceIndex: func(obj any) ([]string, error) {
		n := obj.(*corev1.Node)
		p := n.Spec.ProviderID
		return []string{p[strings.LastIndexByte(p, '/')+1:]}, nil
	}}); err != nil {
		return nil, fmt.Errorf("failed to index nodes by instance id: %w", err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, ctx.Err()
	}
	return &KubeCluster{Client: client, RuntimeNamespaces: []string{"trellis-system", "kube-system"}, Clock: clock.RealClock{}, nodes: inf}, nil
}

// Node returns the node whose providerID ends with the instance id.
func (k *KubeCluster) Node(_ context.Context, instanceID string) (*corev1.Node, error) {
	objs, err := k.nodes.GetIndexer().ByIndex(instanceIndex, instanceID)
	if err != nil {
		return nil, fmt.Errorf("failed to look up the node of instance %s: %w", instanceID, err)
	}
	if len(objs) == 0 {
		return nil, nil
	}
	return objs[0].(*corev1.Node), nil
}

// Ready: the node is Ready and schedulable, and every DaemonSet of the
// runtime namespaces that targets it has a Ready pod on it.
func (k *KubeCluster) Ready(ctx context.Context, n *corev1.Node) (bool, string, error) {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return false, "not Ready", nil
	}
	if n.Spec.Unschedulable {
		return false, "cordoned", nil
	}
	pods, err := k.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name).String()})
	if err != nil {
		return false, "", fmt.Errorf("failed to list the pods of node %s: %w", n.Name, err)
	}
	readyBy := map[types.UID]bool{}
	for _, p := range pods.Items {
		for _, o := range p.OwnerReferences {
			if o.Kind == "DaemonSet" && podutils.IsPodReady(&p) {
				readyBy[o.UID] = true
			}
		}
	}
	for _, ns := range k.RuntimeNamespaces {
		dss, err := k.Client.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", fmt.Errorf("failed to list the daemonsets of namespace %s: %w", ns, err)
		}
		for _, ds := range dss.Items {
			if targets(&ds, n) && !readyBy[ds.UID] {
				return false, fmt.Sprintf("DaemonSet %s/%s has no Ready pod on it", ds.Namespace, ds.Name), nil
			}
		}
	}
	return true, "", nil
}

func targets(ds *appsv1.DaemonSet, n *corev1.Node) bool {
	sel := labels.SelectorFromSet(ds.Spec.Template.Spec.NodeSelector)
	return sel.Matches(labels.Set(n.Labels))
}

// Taint adds the rollout's PreferNoSchedule taint and annotation.
func (k *KubeCluster) Taint(ctx context.Context, n *corev1.Node, rollout string) error {
	for _, t := range n.Spec.Taints {
		if t.Key == TaintKey {
			return nil
		}
	}
	patch := map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{AnnotationRollout: rollout + "/old"}},
		"spec":     map[string]any{"taints": append(n.Spec.Taints, corev1.Taint{Key: TaintKey, Value: rollout, Effect: corev1.TaintEffectPreferNoSchedule})},
	}
	return k.patch(ctx, n.Name, patch)
}

func (k *KubeCluster) patch(ctx context.Context, node string, patch map[string]any) error {
	b, err := jsonMarshal(patch)
	if err != nil {
		return err
	}
	if _, err = k.Client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, b, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("failed to patch node %s: %w", node, err)
	}
	return nil
}

// Drain cordons the node, evicts its pods (not DaemonSet or mirror pods,
// nor pods marked skip; pods marked wait-for-completion are waited for),
// and waits until they are gone. Evictions refused by a PDB are retried
// until the timeout, and the blocking PDB is reported. A pod whose
// eviction the PDB already granted, by a drain killed before the delete,
// is deleted (evict.go).
func (k *KubeCluster) Drain(ctx context.Context, n *corev1.Node, opts DrainOptions, blocked func(string)) error {
	if err := k.patch(ctx, n.Name, map[string]any{"spec": map[string]any{"unschedulable": true}}); err != nil {
		return fmt.Errorf("failed to cordon: %w", err)
	}
	deadline := k.Clock.Now().Add(opts.Timeout)
	for {
		pods, err := k.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name).String()})
		if err != nil {
			return fmt.Errorf("failed to list the pods of node %s: %w", n.Name, err)
		}
		var left []string // the pods that stay, and why
		var blocker string
		seen := budgets{}
		for i := range pods.Items {
			p := &pods.Items[i]
			if skipDrain(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			switch {
			case p.DeletionTimestamp != nil:
				// The timestamp is when its grace period ends.
				left = append(left, fmt.Sprintf("%s/%s terminating, grace ending %s", p.Namespace, p.Name, relative(k.Clock.Since(p.DeletionTimestamp.Time))))
				continue // going
			case p.Annotations[AnnotationDrain] == DrainWaitForCompletion:
				left = append(left, fmt.Sprintf("%s/%s left to complete", p.Namespace, p.Name))
				continue
			}
			left = append(left, p.Namespace+"/"+p.Name)
			ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
			if opts.GracePeriod != nil {
				ev.DeleteOptions = &metav1.DeleteOptions{GracePeriodSeconds: opts.GracePeriod}
			}
			err := k.Client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
			switch {
			case err == nil, apierrors.IsNotFound(err):
			case apierrors.IsTooManyRequests(err):
				pdb, granted := k.refused(ctx, seen, p)
				if granted {
					// Its budget holds a grant for it: an eviction whose
					// delete may have been lost (evict.go).
					done, why, err := k.finishGrant(ctx, p, opts)
					if err != nil {
						return err
					}
					if done {
						continue // gone by a later pass
					}
					left[len(left)-1] += " (granted, kept: " + why + ")"
				}
				blocker = pdb
			default:
				return fmt.Errorf("failed to evict %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if blocker != "" && blocked != nil {
			blocked(blocker)
		}
		if k.Clock.Now().After(deadline) {
			msg := fmt.Sprintf("%d pods still on the node after %s (%s)", len(left), opts.Timeout, firstOf(left, 10))
			if blocker != "" {
				msg += "; evictions refused by PodDisruptionBudget " + blocker
			}
			return errors.New(msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-k.Clock.After(500 * time.Millisecond):
		}
	}
}

func skipDrain(p *corev1.Pod) bool {
	if p.Annotations[AnnotationDrain] == DrainSkip {
		return true
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return true
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// relative says how far a moment is from now: "in 25s" or "12s ago".
func relative(since time.Duration) string {
	if since < 0 {
		return "in " + (-since).Round(time.Second).String()
	}
	return since.Round(time.Second).String() + " ago"
}

// firstOf joins the first n items and counts the rest.
func firstOf(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}
