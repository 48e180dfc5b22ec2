package local

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/bootstrap/render"
)

// restartPods deletes the pods that run any of images, so that their
// controllers replace them with pods on the image's new content.
func restartPods(ctx context.Context, cs kubernetes.Interface, images []string, log *slog.Logger) error {
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	for _, p := range pods.Items {
		uses := false
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			uses = uses || slices.Contains(images, c.Image)
		}
		if !uses {
			continue
		}
		log.Info("restarting a pod onto its changed image", "pod", p.Namespace+"/"+p.Name)
		if err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// labelInstanceGroups gives every node the instance-group label kops's
// nodes carry (render.LabelInstanceGroup), from the one it registered with,
// as kops-controller does on AWS: validation reads the same label here.
// kind runs one node per instance group, and on a new cluster a worker's
// kubelet registers its Node just after kind's join returns: the step
// first waits until every group of the definition has its node.
func (u *up) labelInstanceGroups(ctx context.Context) error {
	var nodes []corev1.Node
	var missing []string
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, nodeRegisterTimeout, true, func(ctx context.Context) (bool, error) {
		l, err := u.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			lastErr = err
			return false, nil
		}
		nodes, missing = l.Items, nil
		for _, ig := range u.def.InstanceGroups {
			if !slices.ContainsFunc(nodes, func(n corev1.Node) bool { return n.Labels[render.LabelKindInstanceGroup] == ig.Name }) {
				missing = append(missing, ig.Name)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		if lastErr != nil && nodes == nil {
			return fmt.Errorf("list nodes: %w", lastErr)
		}
		return fmt.Errorf("no node of instance groups %s registered within %s: %w", strings.Join(missing, ", "), nodeRegisterTimeout, err)
	}
	for _, n := range nodes {
		ig := n.Labels[render.LabelKindInstanceGroup]
		if ig == "" || n.Labels[render.LabelInstanceGroup] == ig {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, render.LabelInstanceGroup, ig)
		if _, err := u.client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("label node %s: %w", n.Name, err)
		}
	}
	return nil
}

// nodeRegisterTimeout bounds the wait for a new cluster's nodes to
// register (seconds, normally).
const nodeRegisterTimeout = 2 * time.Minute
