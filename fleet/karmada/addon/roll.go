package addon

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/trellis-dev/trellis/addons"
)

// rollFleetMembers replaces the fleet API's members whose pods run an
// older template than their StatefulSet's (a changed addon, or the
// restart after a certificate renewal), one at a time: a member that is
// not ready first (it holds no part of the quorum, and it is the one a fix
// is for), then the others from the highest ordinal, each only while the
// members left ready keep a quorum, and the next only once the one before
// is back and ready on the new template. The StatefulSet is OnDelete
// (rendered so for more than one member): the controller recreates a
// deleted pod on the new template and replaces nothing itself. An
// interrupted roll is taken up by the next apply (the outdated members are
// read from the pods). Without a wait (a.Wait 0) nothing is replaced and
// the outdated members are reported.
func rollFleetMembers(ctx context.Context, a *addons.Applier) ([]string, error) {
	s, err := a.Client.AppsV1().StatefulSets(addons.Namespace).Get(ctx, KarmadaService, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read statefulset %s: %w", KarmadaService, err)
	}
	if s.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType || members(s) < 2 {
		return nil, nil
	}
	if a.Wait <= 0 {
		if s.Status.ObservedGeneration < s.Generation || s.Status.CurrentRevision != s.Status.UpdateRevision {
			say(a, "the fleet API's members may run an older template: they are replaced one at a time only by an apply that waits (--wait)")
		}
		return nil, nil
	}
	var rolled []string
	for {
		s, err := observedFleet(ctx, a)
		if err != nil {
			return rolled, err
		}
		m, err := readFleetMembers(ctx, a, s)
		if err != nil {
			return rolled, err
		}
		next := m.next()
		if next == nil {
			return rolled, nil
		}
		if err := waitQuorumWithout(ctx, a, s, next); err != nil {
			return rolled, err
		}
		start := a.Now()
		was := "ready"
		if !podutils.IsPodReady(next) {
			was = "not ready"
		}
		if err := a.Client.CoreV1().Pods(addons.Namespace).Delete(ctx, next.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &next.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return rolled, fmt.Errorf("failed to replace fleet API member %s: %w", next.Name, err)
		}
		if err := waitReplaced(ctx, a, next, m.revision); err != nil {
			return rolled, err
		}
		rolled = append(rolled, next.Name)
		say(a, fmt.Sprintf("replaced fleet API member %s (%s) on revision %s: ready in %s", next.Name, was, m.revision, a.Now().Sub(start).Round(time.Second)))
	}
}

// fleetMembers is the fleet API's pods by ordinal, and the revision the
// StatefulSet's template is at.
type fleetMembers struct {
	n        int
	revision string
	pods     map[int]*corev1.Pod
}

// next is the member to replace next, or nil: the lowest outdated member
// that is not ready, else the highest outdated one. A pod already being
// deleted is not outdated (its replacement will be current).
func (m fleetMembers) next() *corev1.Pod {
	var outdated []int
	for i, p := range m.pods {
		if p.DeletionTimestamp == nil && p.Labels[appsv1.StatefulSetRevisionLabel] != m.revision {
			outdated = append(outdated, i)
		}
	}
	sort.Ints(outdated)
	for _, i := range outdated {
		if !podutils.IsPodReady(m.pods[i]) {
			return m.pods[i]
		}
	}
	if len(outdated) == 0 {
		return nil
	}
	return m.pods[outdated[len(outdated)-1]]
}

// readyWithout counts the ready members other than p.
func (m fleetMembers) readyWithout(p *corev1.Pod) (ready int, notReady []string) {
	for i := range m.n {
		q, ok := m.pods[i]
		switch {
		case ok && q.Name == p.Name:
		case ok && q.DeletionTimestamp == nil && podutils.IsPodReady(q):
			ready++
		default:
			notReady = append(notReady, fmt.Sprintf("%s-%d", KarmadaService, i))
		}
	}
	return ready, notReady
}

// observedFleet is the fleet API's StatefulSet once its controller has
// seen its latest generation (the update revision is then the template's).
func observedFleet(ctx context.Context, a *addons.Applier) (*appsv1.StatefulSet, error) {
	var s *appsv1.StatefulSet
	timedOut, err := a.Poll(ctx, func() (bool, error) {
		var err error
		if s, err = a.Client.AppsV1().StatefulSets(addons.Namespace).Get(ctx, KarmadaService, metav1.GetOptions{}); err != nil {
			return false, fmt.Errorf("failed to read statefulset %s: %w", KarmadaService, err)
		}
		return s.Status.ObservedGeneration >= s.Generation && s.Status.UpdateRevision != "", nil
	})
	if timedOut {
		var gen int64
		if s != nil {
			gen = s.Generation
		}
		return nil, fmt.Errorf("statefulset %s: its controller did not observe generation %d within %s", KarmadaService, gen, a.Wait)
	}
	return s, err
}

// readFleetMembers reads the members' pods.
func readFleetMembers(ctx context.Context, a *addons.Applier, s *appsv1.StatefulSet) (fleetMembers, error) {
	sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
	if err != nil {
		return fleetMembers{}, fmt.Errorf("statefulset %s: %w", KarmadaService, err)
	}
	pods, err := a.Client.CoreV1().Pods(addons.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return fleetMembers{}, fmt.Errorf("failed to list the fleet API's pods: %w", err)
	}
	m := fleetMembers{n: members(s), revision: s.Status.UpdateRevision, pods: map[int]*corev1.Pod{}}
	for i := range pods.Items {
		p := &pods.Items[i]
		if n, ok := ordinal(p.Name, KarmadaService+"-"); ok && n < m.n {
			m.pods[n] = p
		}
	}
	return m, nil
}

// waitQuorumWithout waits until the members of s other than p that are
// ready are a quorum, so that replacing p keeps one. A member that is not
// ready is replaced at once (it holds no part of the quorum).
func waitQuorumWithout(ctx context.Context, a *addons.Applier, s *appsv1.StatefulSet, p *corev1.Pod) error {
	if !podutils.IsPodReady(p) {
		return nil
	}
	var why string
	timedOut, err := a.Poll(ctx, func() (bool, error) {
		m, err := readFleetMembers(ctx, a, s)
		if err != nil {
			return false, err
		}
		ready, notReady := m.readyWithout(p)
		quorum := m.n/2 + 1
		why = fmt.Sprintf("replacing %s would leave %d of %d members ready, fewer than the quorum of %d (not ready: %s)", p.Name, ready, m.n, quorum, strings.Join(notReady, ", "))
		return ready >= quorum, nil
	})
	if timedOut {
		return fmt.Errorf("fleet API members not replaced within %s: %s", a.Wait, why)
	}
	return err
}

// waitReplaced waits for old's replacement: a pod of the same name, on
// revision, ready.
func waitReplaced(ctx context.Context, a *addons.Applier, old *corev1.Pod, revision string) error {
	why := "no pod"
	timedOut, err := a.Poll(ctx, func() (bool, error) {
		p, err := a.Client.CoreV1().Pods(addons.Namespace).Get(ctx, old.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			why = "no pod yet"
			return false, nil
		case err != nil:
			return false, fmt.Errorf("failed to read pod %s: %w", old.Name, err)
		case p.UID == old.UID:
			why = "the old pod not gone yet"
			return false, nil
		case p.Labels[appsv1.StatefulSetRevisionLabel] != revision:
			why = "recreated on revision " + p.Labels[appsv1.StatefulSetRevisionLabel]
			return false, nil
		}
		why = podState(p)
		return podutils.IsPodReady(p), nil
	})
	if timedOut {
		return fmt.Errorf("fleet API member %s not ready on revision %s within %s (%s): the other members are left as they are; the next apply goes on", old.Name, revision, a.Wait, why)
	}
	return err
}

// podState says why a pod is not ready, for errors.
func podState(p *corev1.Pod) string {
	parts := []string{"phase " + string(p.Status.Phase)}
	for _, c := range p.Status.ContainerStatuses {
		switch {
		case c.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting: %s", c.Name, c.State.Waiting.Reason))
		case !c.Ready:
			parts = append(parts, c.Name+" not ready")
		}
	}
	return strings.Join(parts, ", ")
}

func say(a *addons.Applier, line string) {
	if a.Out != nil {
		fmt.Fprintln(a.Out, line)
	}
}
