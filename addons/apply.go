package addons

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/internal/kubeapply"
	"github.com/trellis-dev/trellis/internal/pki"
)

// RecordConfigMap records, per addon, the version and manifest hash last
// applied: an unchanged addon is not applied again.
const RecordConfigMap = "trellis-addons"

// FieldManager owns what the bundle applies.
const FieldManager = "trellis-addons"

// Applier applies rendered addons with server-side apply.
type Applier struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	kube    *kubeapply.Applier
	Out     io.Writer
	// Wait is how long each addon's workloads may take to become ready
	// before the next addon is applied (0: do not wait; a cluster without
	// kubelets, like the tests' control plane, never runs them).
	Wait time.Duration
	// CA, when set, seeds the issuer's CA Secret if there is none (never
	// replaced: rotation is a deliberate Secret update).
	CA *pki.State
	// Force re-applies unchanged addons.
	Force bool
	// Clock dates the certificates the applier mints (default: real).
	Clock clock.PassiveClock
	// Lifecycles are called before and after the addons are applied: those
	// of the addons rendered (see Lifecycle).
	Lifecycles []Lifecycle
}

// NewApplier connects to the cluster of cfg.
func NewApplier(cfg *rest.Config, out io.Writer) (*Applier, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to build a client for %s: %w", cfg.Host, err)
	}
	k, err := kubeapply.New(cfg, FieldManager)
	if err != nil {
		return nil, err
	}
	k.DefaultNamespace = Namespace
	return &Applier{Client: c, Dynamic: k.Dynamic, kube: k, Out: out}, nil
}

// Result says what Apply did per addon: applied or unchanged.
type Result struct {
	Addon   string `json:"addon"`
	Version string `json:"version"`
	Action  string `json:"action"`
	Objects int    `json:"objects"`
}

// Apply applies the addons in order. It stops at the first addon that fails
// (its dependants are not applied).
func (a *Applier) Apply(ctx context.Context, rendered []Rendered) ([]Result, error) {
	for _, lc := range a.lifecycles() {
		if err := lc.Check(ctx, a, rendered); err != nil {
			return nil, err
		}
	}
	if err := a.ensureNamespace(ctx); err != nil {
		return nil, err
	}
	record, err := a.record(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.ensureSecrets(ctx, rendered); err != nil {
		return nil, err
	}
	var results []Result
	for _, r := range rendered {
		if !a.pending(record, r) {
			results = append(results, Result{Addon: r.Addon.Name, Version: r.Addon.Version, Action: "unchanged", Objects: len(r.Objects)})
			continue
		}
		if err := a.applyAddon(ctx, r); err != nil {
			return results, fmt.Errorf("addon %s %s: %w", r.Addon.Name, r.Addon.Version, err)
		}
		if record.Data == nil {
			record.Data = map[string]string{}
		}
		record.Data[r.Addon.Name] = recordKey(r)
		if record, err = a.Client.CoreV1().ConfigMaps(Namespace).Update(ctx, record, metav1.UpdateOptions{}); err != nil {
			return results, fmt.Errorf("failed to record addon %s: %w", r.Addon.Name, err)
		}
		results = append(results, Result{Addon: r.Addon.Name, Version: r.Addon.Version, Action: "applied", Objects: len(r.Objects)})
		if a.Out != nil {
			fmt.Fprintf(a.Out, "applied %s %s (%d objects)\n", r.Addon.Name, r.Addon.Version, len(r.Objects))
		}
	}
	for _, lc := range a.lifecycles() {
		done, err := lc.Finish(ctx, a)
		results = append(results, done...)
		if err != nil {
			return results, err
		}
	}
	pruned, err := a.Prune(ctx, rendered)
	for _, p := range pruned {
		results = append(results, Result{Addon: p, Action: "pruned"})
		if a.Out != nil {
			fmt.Fprintf(a.Out, "pruned %s\n", p)
		}
	}
	return results, err
}

// recordKey is what the addon record holds for an applied addon: its
// version and the hash of its rendering.
func recordKey(r Rendered) string { return r.Addon.Version + "/" + r.Hash }

// pending says whether Apply applies r: it changed since the record, or
// the apply is forced.
func (a *Applier) pending(record *corev1.ConfigMap, r Rendered) bool {
	return a.Force || record.Data[r.Addon.Name] != recordKey(r)
}

// Now is the time on the applier's clock (default: real).
func (a *Applier) Now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}

func (a *Applier) ensureNamespace(ctx context.Context) error {
	_, err := a.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create namespace %s: %w", Namespace, err)
	}
	return nil
}

func (a *Applier) record(ctx context.Context) (*corev1.ConfigMap, error) {
	cm, err := a.Client.CoreV1().ConfigMaps(Namespace).Get(ctx, RecordConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm, err = a.Client.CoreV1().ConfigMaps(Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RecordConfigMap, Namespace: Namespace}}, metav1.CreateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read the addon record: %w", err)
	}
	return cm, nil
}

// CreateSecret creates secret name in the addons' namespace unless it
// exists (an existing secret is never replaced here).
func (a *Applier) CreateSecret(ctx context.Context, name string, data map[string][]byte) error {
	_, err := a.Client.CoreV1().Secrets(Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}, Data: data}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create secret %s: %w", name, err)
	}
	return nil
}

// ensureSecrets creates the secrets the bundle references and does not
// render (key material never goes through templates or golden files), and
// has each lifecycle seed its own.
func (a *Applier) ensureSecrets(ctx context.Context, rendered []Rendered) error {
	if a.CA != nil {
		data, err := a.CA.Data()
		if err != nil {
			return fmt.Errorf("failed to read the issuer CA: %w", err)
		}
		if err := a.CreateSecret(ctx, "trellis-ca", data); err != nil {
			return err
		}
	}
	for _, lc := range a.lifecycles() {
		if err := lc.Seed(ctx, a, rendered); err != nil {
			return err
		}
	}
	pw := make([]byte, 24)
	if _, err := rand.Read(pw); err != nil {
		return fmt.Errorf("failed to generate the ZooKeeper digest: %w", err)
	}
	return a.CreateSecret(ctx, "trellis-zk-digest", map[string][]byte{"digest": []byte("trellis-registrar:" + hex.EncodeToString(pw))})
}

func (a *Applier) applyAddon(ctx context.Context, r Rendered) error {
	if err := a.replaceJobs(ctx, r.Objects); err != nil {
		return err
	}
	// CRDs first, then wait until they are served.
	if err := a.kube.ApplyCRDsFirst(ctx, r.Objects...); err != nil {
		return err
	}
	if a.Wait > 0 {
		var workloads []*unstructured.Unstructured
		for _, o := range r.Objects {
			if o.GetKind() != "CustomResourceDefinition" {
				workloads = append(workloads, o)
			}
		}
		return a.waitReady(ctx, workloads)
	}
	return nil
}

// waitReady waits for the addon's Deployments, DaemonSets and StatefulSets.
func (a *Applier) waitReady(ctx context.Context, objs []*unstructured.Unstructured) error {
	var why string
	timedOut, err := a.Poll(ctx, func() (bool, error) {
		for _, o := range objs {
			ns := o.GetNamespace()
			switch o.GetKind() {
			case "Deployment":
				d, err := a.Client.AppsV1().Deployments(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
				if err != nil || d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < *d.Spec.Replicas {
					why = "Deployment " + o.GetName() + " not available"
					return false, nil
				}
			case "DaemonSet":
				d, err := a.Client.AppsV1().DaemonSets(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
				if err != nil || d.Status.ObservedGeneration < d.Generation || d.Status.NumberReady < d.Status.DesiredNumberScheduled {
					why = "DaemonSet " + o.GetName() + " not ready on every node"
					return false, nil
				}
			case "Job":
				j, err := a.Client.BatchV1().Jobs(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
				if err != nil {
					why = "Job " + o.GetName() + " not found"
					return false, nil
				}
				for _, c := range j.Status.Conditions {
					if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
						return false, fmt.Errorf("job %s failed: %s: %s", o.GetName(), c.Reason, c.Message)
					}
				}
				if j.Status.Succeeded < 1 {
					why = "Job " + o.GetName() + " not complete"
					return false, nil
				}
			case "StatefulSet":
				s, err := a.Client.AppsV1().StatefulSets(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
				if err != nil || s.Status.ReadyReplicas < *s.Spec.Replicas {
					why = "StatefulSet " + o.GetName() + " not ready"
					return false, nil
				}
			}
		}
		return true, nil
	})
	if timedOut {
		return fmt.Errorf("not ready within %s: %s", a.Wait, why)
	}
	return err
}

// Poll checks cond every second, from now, until it holds or fails, for
// up to a.Wait; timedOut: it never held (or ctx ended first). The checks
// read with the caller's context, not the poll's: the poll's deadline
// would fail the last round's reads, and a caller would then report the
// failed read instead of what was not ready.
func (a *Applier) Poll(ctx context.Context, cond func() (bool, error)) (timedOut bool, err error) {
	err = wait.PollUntilContextTimeout(ctx, time.Second, a.Wait, true, func(context.Context) (bool, error) { return cond() })
	if err != nil && (wait.Interrupted(err) || ctx.Err() != nil) {
		return true, nil
	}
	return false, err
}

// replaceJobs deletes the addon's Jobs that exist, and waits until they
// are gone, so that they run again as rendered: a Job's template cannot be
// updated, and an addon is applied again only when it changed (or is
// forced).
func (a *Applier) replaceJobs(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if o.GetKind() != "Job" {
			continue
		}
		jobs := a.Client.BatchV1().Jobs(o.GetNamespace())
		// Background: the Job goes at once and the garbage collector
		// removes its pods (foreground deletion would wait on them).
		bg := metav1.DeletePropagationBackground
		if err := jobs.Delete(ctx, o.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg}); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("failed to delete job %s to run it again: %w", o.GetName(), err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := jobs.Get(ctx, o.GetName(), metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			return fmt.Errorf("job %s was not deleted: %w", o.GetName(), err)
		}
	}
	return nil
}
