//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// holdFor is how long the test leaves a cordoned node's wait-for-completion
// pod running, checking that the drain neither evicts it nor terminates
// the node, before it lets the task finish.
const holdFor = 20 * time.Second

// heldTask is a TrellisJobSet on the batch group whose pod is marked
// wait-for-completion and runs until the test releases it: only after its
// node is seen cordoned and then left alone for holdFor. So the drain's
// waiting is observed, not assumed from timing.
type heldTask struct {
	ns, name   string
	pod, node  string
	done       chan struct{}
	mu         sync.Mutex
	err        error
	cordonedAt time.Time
	released   time.Time
}

// startHeldTask creates the job set and waits for its pod to run.
func startHeldTask(t *testing.T, ns string) *heldTask {
	t.Helper()
	ctx := context.Background()
	h := &heldTask{ns: ns, name: "crunch", done: make(chan struct{})}
	js := &v1alpha1.TrellisJobSet{
		ObjectMeta: metav1.ObjectMeta{Name: h.name, Namespace: ns},
		Spec: v1alpha1.TrellisJobSetSpec{
			Shards:       1,
			BackoffLimit: new(int32(0)),
			Template: v1alpha1.PodTemplate{
				Metadata:     v1alpha1.PodMetadata{Annotations: map[string]string{rollout.AnnotationDrain: rollout.DrainWaitForCompletion}},
				NodeSelector: map[string]string{"trellis.dev/pool": "batch"},
				Containers:   []corev1.Container{{Name: "task", Image: "trellis/hello:0.1.0", Args: []string{"wait-for", "/tmp/release"}}},
			},
		},
	}
	if err := cl.Create(ctx, js); err != nil {
		t.Fatal(err)
	}
	eventually(t, "crunch's task running", 3*time.Minute, func() (bool, string) {
		p, err := h.taskPod(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == "task" && c.State.Running != nil {
				h.pod, h.node = p.Name, p.Spec.NodeName
				return true, ""
			}
		}
		return false, p.Name + " " + string(p.Status.Phase)
	})
	return h
}

func (h *heldTask) taskPod(ctx context.Context) (*corev1.Pod, error) {
	pods, err := cs.CoreV1().Pods(h.ns).List(ctx, metav1.ListOptions{LabelSelector: wellknown.LabelWorkload + "=" + h.name})
	if err != nil {
		return nil, err
	}
	if len(pods.Items) != 1 {
		return nil, fmt.Errorf("%d pods of %s, want 1", len(pods.Items), h.name)
	}
	return &pods.Items[0], nil
}

// watch runs until the task's node is cordoned, holds, checks and
// releases the task (in the background; check waits for it).
func (h *heldTask) watch(ctx context.Context) {
	go func() {
		defer close(h.done)
		err := h.hold(ctx)
		h.mu.Lock()
		h.err = err
		h.mu.Unlock()
	}()
}

func (h *heldTask) hold(ctx context.Context) error {
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, h.node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s before its cordon: %w", h.node, err)
		}
		if n.Spec.Unschedulable {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	h.cordonedAt = time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(holdFor):
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, h.node, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("node %s %s after its cordon, while its wait-for-completion task ran: %w", h.node, holdFor, err)
	}
	p, err := cs.CoreV1().Pods(h.ns).Get(ctx, h.pod, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("task pod %s during the drain: %w", h.pod, err)
	}
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("task pod %s was disturbed by the drain: phase %s, deleted %v", h.pod, p.Status.Phase, p.DeletionTimestamp)
	}
	if err := execErr(ctx, p, "task", "/trellis-hello", "touch", "/tmp/release"); err != nil {
		return err
	}
	h.released = time.Now()
	return nil
}

// check waits for the hold to end and for the job to have succeeded once,
// with no failed pod, on the node it started on.
func (h *heldTask) check(t *testing.T) {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("the batch node %s was never cordoned", h.node)
	}
	if h.err != nil {
		t.Fatal(h.err)
	}
	ctx := context.Background()
	jobs, err := cs.BatchV1().Jobs(h.ns).List(ctx, metav1.ListOptions{LabelSelector: wellknown.LabelWorkload + "=" + h.name})
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("crunch's jobs: %v (%d)", err, len(jobs.Items))
	}
	j := jobs.Items[0]
	if j.Status.Succeeded != 1 || j.Status.Failed != 0 {
		t.Errorf("job %s: %d succeeded, %d failed; want 1 and 0", j.Name, j.Status.Succeeded, j.Status.Failed)
	}
	if !jobComplete(&j) {
		t.Errorf("job %s not complete: %+v", j.Name, j.Status.Conditions)
	}
	t.Logf("batch task %s on %s: cordoned at +0, left running %s, released; the node went after it (job %d succeeded, %d failed)",
		h.pod, h.node, h.released.Sub(h.cordonedAt).Round(time.Second), j.Status.Succeeded, j.Status.Failed)
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// execErr runs a command in a container and returns its error.
func execErr(ctx context.Context, p *corev1.Pod, container string, cmd ...string) error {
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.Namespace).Name(p.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, req.URL())
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out}); err != nil {
		return fmt.Errorf("exec %v in %s: %w: %s", cmd, p.Name, err, out.String())
	}
	return nil
}
