package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
	"github.com/trellis-dev/trellis/controller/trelliscronjob"
	"github.com/trellis-dev/trellis/controller/trellisdaemon"
	"github.com/trellis-dev/trellis/controller/trellisjobset"
	"github.com/trellis-dev/trellis/controller/trellisservice"
	"github.com/trellis-dev/trellis/controller/trellisstatefulset"
	"github.com/trellis-dev/trellis/controller/trellistrainingjob"
)

// Config is the controller's configuration; zero values take defaults in New.
type Config struct {
	// QPS and Burst limit the controller's client (default 50 / 100).
	QPS   float32
	Burst int
	// UserAgent identifies the controller to the apiserver (metrics by client).
	UserAgent string
	// MetricsAddr and ProbeAddr serve /metrics and /healthz, /readyz ("0" disables).
	MetricsAddr string
	ProbeAddr   string
	// LeaderElection with LeaderElectionNamespace (default trellis-system).
	LeaderElection          bool
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election
	// (controller-runtime's defaults: 15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Workers per kind (default 4).
	Workers int
	// BaseDelay and MaxDelay bound per-item exponential backoff (5ms, 5m).
	BaseDelay, MaxDelay time.Duration
	// ProfileRolloutBatch workloads adopt a new runtime profile per
	// ProfileRolloutInterval (default 10 per minute).
	ProfileRolloutBatch    int
	ProfileRolloutInterval time.Duration
	// Clock paces the profile rollout's batches (default the real clock;
	// tests hold a fake one still and step it an interval at a time).
	Clock clock.PassiveClock
	// Webhook, when set, serves the admission webhook over TLS.
	Webhook *WebhookConfig
	// DaemonNamespaces may run TrellisDaemons (default trellis-system, kube-system).
	DaemonNamespaces []string
	// SyncPeriod re-delivers every cached object to the reconcilers this
	// often (from the cache: it costs no API call). Default 10h.
	SyncPeriod time.Duration
	// SkipNameValidation lets one process build several managers (tests
	// restart the controller in-process).
	SkipNameValidation bool
}

func (c *Config) defaults() {
	if c.QPS == 0 {
		c.QPS = 50
	}
	if c.Burst == 0 {
		c.Burst = 100
	}
	if c.UserAgent == "" {
		c.UserAgent = "trellis-controller"
	}
	if c.LeaderElectionNamespace == "" {
		c.LeaderElectionNamespace = inject.ProfileNamespace
	}
	if c.ProfileRolloutBatch == 0 {
		c.ProfileRolloutBatch = 10
	}
	if c.ProfileRolloutInterval == 0 {
		c.ProfileRolloutInterval = time.Minute
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.DaemonNamespaces == nil {
		c.DaemonNamespaces = trellisdaemon.DefaultNamespaces
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.BaseDelay == 0 {
		c.BaseDelay = 5 * time.Millisecond
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = 5 * time.Minute
	}
}

// Scheme has the built-in kinds and the Trellis workload kinds.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// New builds the manager with every reconciler registered. The cache holds
// only what Trellis manages (label app.kubernetes.io/managed-by=trellis) plus
// the runtime profile, so memory stays proportional to Trellis's own objects.
func New(restCfg *rest.Config, cfg Config) (manager.Manager, error) {
	cfg.defaults()
	rc := rest.CopyConfig(restCfg)
	rc.QPS, rc.Burst, rc.UserAgent = cfg.QPS, cfg.Burst, cfg.UserAgent
	managed := labels.SelectorFromSet(labels.Set{wellknown.LabelManagedBy: wellknown.ManagedBy})
	// One entry per type (the profile ConfigMap is read through the same
	// ConfigMap informer, so it carries the label too).
	byObject := map[client.Object]cache.ByObject{}
	seen := map[string]bool{}
	kinds := workloads(cfg)
	owned := []client.Object{&corev1.ConfigMap{}}
	for _, k := range kinds {
		owned = append(owned, k.Owns()...)
	}
	for _, o := range owned {
		if t := fmt.Sprintf("%T", o); !seen[t] {
			seen[t] = true
			byObject[o] = cache.ByObject{Label: managed}
		}
	}
	var whServer webhook.Server
	if w := cfg.Webhook; w != nil {
		whServer = webhook.NewServer(webhook.Options{Host: w.Host, Port: w.Port, CertDir: w.CertDir, CertName: orDefault(w.CertName, "tls.crt"), KeyName: orDefault(w.KeyName, "tls.key")})
	}
	mgr, err := ctrl.NewManager(rc, ctrl.Options{
		WebhookServer:           whServer,
		Scheme:                  Scheme(),
		Metrics:                 metricsserver.Options{BindAddress: orDefault(cfg.MetricsAddr, "0")},
		HealthProbeBindAddress:  orDefault(cfg.ProbeAddr, "0"),
		LeaderElection:          cfg.LeaderElection,
		LeaderElectionID:        "trellis-controller",
		LeaderElectionNamespace: cfg.LeaderElectionNamespace,
		LeaseDuration:           durationOrNil(cfg.LeaseDuration),
		RenewDeadline:           durationOrNil(cfg.RenewDeadline),
		RetryPeriod:             durationOrNil(cfg.RetryPeriod),
		// A stopped leader hands the lease over at once.
		LeaderElectionReleaseOnCancel: true,
		// The controller never reads managedFields: its cache holds objects
		// without them (at 35,000 pods they are most of the memory).
		Cache:  cache.Options{ByObject: byObject, SyncPeriod: syncPeriod(cfg.SyncPeriod), DefaultTransform: cache.TransformStripManagedFields()},
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: false}},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("failed to add the healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("failed to add the readyz check: %w", err)
	}
	profiles := &ProfileRollout{
		Cache: mgr.GetCache(), Client: mgr.GetClient(),
		Batch: cfg.ProfileRolloutBatch, Interval: cfg.ProfileRolloutInterval, Now: cfg.Clock.Now,
	}
	env := workload.Env{
		Clients: workload.Clients{Client: mgr.GetClient(), Cache: mgr.GetCache(), APIReader: mgr.GetAPIReader()},
		Events:  mgr.GetEventRecorder("trellis-controller"),
	}
	opts := ctrlcontroller.Options{MaxConcurrentReconciles: cfg.Workers, RateLimiter: RateLimiter(cfg.BaseDelay, cfg.MaxDelay), SkipNameValidation: &cfg.SkipNameValidation}
	for _, k := range kinds {
		if err := k.register(mgr, opts, env, profiles, cfg.Webhook != nil); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// workloads are the kinds the controller reconciles.
func workloads(cfg Config) []workloadKind {
	return []workloadKind{
		kind[*v1alpha1.TrellisService]{trellisservice.Workload{}},
		kind[*v1alpha1.TrellisJobSet]{trellisjobset.Workload{}},
		kind[*v1alpha1.TrellisCronJob]{trelliscronjob.Workload{}},
		kind[*v1alpha1.TrellisDaemon]{trellisdaemon.Workload{Namespaces: cfg.DaemonNamespaces}},
		kind[*v1alpha1.TrellisTrainingJob]{trellistrainingjob.Workload{}},
		kind[*v1alpha1.TrellisStatefulSet]{trellisstatefulset.Workload{}},
	}
}

// workloadKind is a workload.Kind with its object type erased, so that New
// can hold every kind in one list.
type workloadKind interface {
	Owns() []client.Object
	register(mgr manager.Manager, opts ctrlcontroller.Options, env workload.Env, p workload.ProfileSource, webhooks bool) error
	accepts(obj client.Object) bool
	validate(ctx context.Context, obj client.Object, p workload.ProfileSource) ([]string, error)
	translate(obj client.Object, p *inject.Profile) ([]client.Object, error)
}

type kind[T client.Object] struct{ workload.Kind[T] }

func (k kind[T]) translate(obj client.Object, p *inject.Profile) ([]client.Object, error) {
	return k.Translate(obj.(T), p)
}

// register adds the kind's controller (named after the kind in lower case)
// and, when asked, its admission webhook. The controller watches the kind,
// what it owns, and the runtime profile, which requeues every object of the
// kind so each can take (or wait for) its turn in a rollout.
func (k kind[T]) register(mgr manager.Manager, opts ctrlcontroller.Options, env workload.Env, p workload.ProfileSource, webhooks bool) error {
	r, err := workload.NewReconciler(k.Kind, env, p)
	if err != nil {
		return err
	}
	b := builder.ControllerManagedBy(mgr).For(k.New()).WithOptions(opts).Named(strings.ToLower(k.Name())).
		Watches(&corev1.ConfigMap{}, enqueueAll(mgr.GetCache(), k.NewList), builder.WithPredicates(isProfile))
	for _, o := range k.Owns() {
		b = b.Owns(o)
	}
	if err := b.Complete(r); err != nil {
		return fmt.Errorf("failed to register %s controller: %w", k.Name(), err)
	}
	if webhooks {
		return registerWebhook(mgr, k.Kind, p)
	}
	return nil
}

func durationOrNil(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}

func syncPeriod(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// RateLimiter is the per-item exponential backoff with jitter (so a burst of
// failing items does not retry in lockstep) under an overall token bucket.
func RateLimiter(base, max time.Duration) workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		&jitter[reconcile.Request]{workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](base, max)},
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(50), 300)},
	)
}

// jitter adds up to 20% to a rate limiter's delays.
type jitter[T comparable] struct {
	workqueue.TypedRateLimiter[T]
}

func (j *jitter[T]) When(item T) time.Duration {
	d := j.TypedRateLimiter.When(item)
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}
