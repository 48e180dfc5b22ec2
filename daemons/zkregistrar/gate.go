package zkregistrar

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/api/wellknown"
)

// Reasons of the trellis.dev/registered condition.
const (
	ReasonRegistered           = "Registered"
	ReasonDeregistered         = "Deregistered"
	ReasonZooKeeperUnavailable = "ZooKeeperUnavailable"
	ReasonInvalidDiscovery     = "InvalidDiscovery"
)

// lostGrace is how long without a session goes unreported.
const lostGrace = time.Second

// Gated reports whether the pod carries the trellis.dev/registered
// readiness gate: its Ready condition then waits for the registrar.
func Gated(p *corev1.Pod) bool {
	for _, g := range p.Spec.ReadinessGates {
		if g.ConditionType == wellknown.ConditionRegistered {
			return true
		}
	}
	return false
}

// gateCondition returns the pod's trellis.dev/registered condition, if any.
func gateCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == wellknown.ConditionRegistered {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// GateInput is what the registrar knows about one gated pod.
type GateInput struct {
	// Serving: the pod should be in the serverset (see Serving).
	Serving bool
	// Invalid is why the pod's discovery annotations cannot be registered.
	Invalid error
	// Registered: this process's session holds the pod's member znode (the
	// create returned).
	Registered bool
	// SessionLost is how long the registrar has been without the session
	// it had; SessionTimeout is the ZooKeeper session timeout.
	SessionLost, SessionTimeout time.Duration
	// Current is the condition on the pod now (what this process last
	// wrote, when the informer has not caught up yet).
	Current corev1.ConditionStatus
	// CurrentReason is the current condition's reason.
	CurrentReason string
}

// Gate is the condition a gated pod should carry, or ok=false when the
// current one must stay as it is. Writes happen only on a change of status
// or reason, so a pod's lifecycle costs two (True once registered, False
// once deregistered):
//   - serving and registered: True;
//   - serving, not registered yet, with a session: unchanged (the create is
//     on its way; a restarted registrar re-registers without a flap);
//   - no session: a pod not True says so in a False condition at once; a
//     True pod keeps it until the session has been lost for longer than
//     its timeout, after which ZooKeeper has dropped the member (or the
//     ensemble is down): then False, never a stale True;
//   - not serving and deregistered: False (the znode delete returned).
func Gate(in GateInput) (status corev1.ConditionStatus, reason, message string, ok bool) {
	expired := in.SessionLost > in.SessionTimeout
	// A registrar that just started has no session for a few milliseconds:
	// not worth a write.
	lost := in.SessionLost > lostGrace
	switch {
	case in.Serving && in.Invalid != nil:
		status, reason, message = corev1.ConditionFalse, ReasonInvalidDiscovery, in.Invalid.Error()
	case in.Serving && in.Registered && !expired:
		status, reason, message = corev1.ConditionTrue, ReasonRegistered, "the pod's member znode exists"
	case lost && (expired || in.Current != corev1.ConditionTrue):
		if !in.Serving && in.Current != corev1.ConditionTrue {
			return "", "", "", false // never was registered: nothing to say
		}
		status, reason = corev1.ConditionFalse, ReasonZooKeeperUnavailable
		message = fmt.Sprintf("no ZooKeeper session for %s: the pod is not registered", in.SessionLost.Round(time.Second))
		if in.Current == corev1.ConditionTrue {
			message = fmt.Sprintf("no ZooKeeper session for %s, longer than its %s timeout: the member znode is gone", in.SessionLost.Round(time.Second), in.SessionTimeout)
		}
	case !in.Serving && !in.Registered && in.Current == corev1.ConditionTrue:
		status, reason, message = corev1.ConditionFalse, ReasonDeregistered, "the pod's member znode was deleted"
	default:
		return "", "", "", false
	}
	if status == in.Current && reason == in.CurrentReason {
		return "", "", "", false
	}
	return status, reason, message, true
}

// patchGate writes the condition with one strategic-merge patch of
// pods/status (conditions merge by type, so the kubelet's are untouched).
func (d *Daemon) patchGate(ctx context.Context, p *corev1.Pod, status corev1.ConditionStatus, reason, message string) error {
	return patchCondition(ctx, d.cfg.Client, p, "", status, reason, message, d.cfg.Clock.Now())
}

// patchCondition is the one write of the trellis.dev/registered condition:
// a strategic-merge patch of pods/status carrying the pod's UID (a pod
// re-created under the same name is never patched by mistake) and, when
// resourceVersion is set, that version (the write is refused with a
// conflict if the pod changed since it was read).
func patchCondition(ctx context.Context, c kubernetes.Interface, p *corev1.Pod, resourceVersion string, status corev1.ConditionStatus, reason, message string, now time.Time) error {
	cond := map[string]any{
		"type": wellknown.ConditionRegistered, "status": status, "reason": reason, "message": message,
		"lastTransitionTime": metav1.NewTime(now).Rfc3339Copy(),
	}
	meta := map[string]any{"uid": p.UID}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	body, err := json.Marshal(map[string]any{
		"metadata": meta,
		"status":   map[string]any{"conditions": []any{cond}},
	})
	if err != nil {
		return fmt.Errorf("encode the condition patch of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	if _, err := c.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("failed to set condition %s=%s on pod %s/%s: %w", wellknown.ConditionRegistered, status, p.Namespace, p.Name, err)
	}
	return nil
}
