package controller

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
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
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
	"github.com/trellis-dev/trellis/controller/kinds"
	"github.com/trellis-dev/trellis/controller/trellisjobset"
	"github.com/trellis-dev/trellis/controller/trellisservice"
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
	if c.DaemonNamespaces == nil {
		c.DaemonNamespaces = kinds.DefaultDaemonNamespaces
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
	managed := labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy})
	// One entry per type (the profile ConfigMap is read through the same
	// ConfigMap informer, so it carries the label too).
	byObject := map[client.Object]cache.ByObject{}
	seen := map[string]bool{}
	owned := append(append(trellisservice.OwnedTypes(), trellisjobset.OwnedTypes()...), &corev1.ConfigMap{}, &batchv1.CronJob{}, &appsv1.DaemonSet{}, &appsv1.StatefulSet{}, &corev1.Pod{})
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
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	profiles := &ProfileRollout{
		Cache: mgr.GetCache(), Client: mgr.GetClient(),
		Batch: cfg.ProfileRolloutBatch, Interval: cfg.ProfileRolloutInterval, Now: time.Now,
	}
	r := &trellisservice.Reconciler{
		Client:    mgr.GetClient(),
		Reader:    mgr.GetCache(),
		APIReader: mgr.GetAPIReader(),
		Events:    mgr.GetEventRecorder("trellis-controller"),
		Profiles:  profiles,
	}
	b := builder.ControllerManagedBy(mgr).
		For(&v1alpha1.TrellisService{}).
		WithOptions(ctrlcontroller.Options{MaxConcurrentReconciles: cfg.Workers, RateLimiter: RateLimiter(cfg.BaseDelay, cfg.MaxDelay), SkipNameValidation: &cfg.SkipNameValidation}).
		Named("trellisservice").
		Watches(&corev1.ConfigMap{}, enqueueAll(mgr.GetCache(), func() client.ObjectList { return &v1alpha1.TrellisServiceList{} }), builder.WithPredicates(isProfile))
	for _, o := range trellisservice.OwnedTypes() {
		b = b.Owns(o)
	}
	if err := b.Complete(r); err != nil {
		return nil, fmt.Errorf("failed to register TrellisService controller: %w", err)
	}
	jb := builder.ControllerManagedBy(mgr).
		For(&v1alpha1.TrellisJobSet{}).
		WithOptions(ctrlcontroller.Options{MaxConcurrentReconciles: cfg.Workers, RateLimiter: RateLimiter(cfg.BaseDelay, cfg.MaxDelay), SkipNameValidation: &cfg.SkipNameValidation}).
		Named("trellisjobset").
		Watches(&corev1.ConfigMap{}, enqueueAll(mgr.GetCache(), func() client.ObjectList { return &v1alpha1.TrellisJobSetList{} }), builder.WithPredicates(isProfile))
	for _, o := range trellisjobset.OwnedTypes() {
		jb = jb.Owns(o)
	}
	if err := jb.Complete(&trellisjobset.Reconciler{
		Client:    mgr.GetClient(),
		Reader:    mgr.GetCache(),
		APIReader: mgr.GetAPIReader(),
		Events:    mgr.GetEventRecorder("trellis-controller"),
		Profiles:  profiles,
	}); err != nil {
		return nil, fmt.Errorf("failed to register TrellisJobSet controller: %w", err)
	}
	clients := workload.Clients{Client: mgr.GetClient(), Cache: mgr.GetCache(), APIReader: mgr.GetAPIReader()}
	events := mgr.GetEventRecorder("trellis-controller")
	opts := ctrlcontroller.Options{MaxConcurrentReconciles: cfg.Workers, RateLimiter: RateLimiter(cfg.BaseDelay, cfg.MaxDelay), SkipNameValidation: &cfg.SkipNameValidation}
	if err := register(mgr, opts, kinds.CronJob(), func() client.ObjectList { return &v1alpha1.TrellisCronJobList{} }, []client.Object{&batchv1.CronJob{}}, clients, events, profiles); err != nil {
		return nil, err
	}
	if err := register(mgr, opts, kinds.Daemon(cfg.DaemonNamespaces), func() client.ObjectList { return &v1alpha1.TrellisDaemonList{} }, []client.Object{&appsv1.DaemonSet{}}, clients, events, profiles); err != nil {
		return nil, err
	}
	tb := builder.ControllerManagedBy(mgr).For(&v1alpha1.TrellisTrainingJob{}).WithOptions(opts).Named("trellistrainingjob").
		Watches(&corev1.ConfigMap{}, enqueueAll(mgr.GetCache(), func() client.ObjectList { return &v1alpha1.TrellisTrainingJobList{} }), builder.WithPredicates(isProfile))
	for _, o := range trellistrainingjob.OwnedTypes() {
		tb = tb.Owns(o)
	}
	if err := tb.Complete(&trellistrainingjob.Reconciler{Clients: clients, Events: events, Profiles: profiles}); err != nil {
		return nil, fmt.Errorf("failed to register TrellisTrainingJob controller: %w", err)
	}
	if cfg.Webhook != nil {
		if err := registerWebhooks(mgr, cfg, profiles); err != nil {
			return nil, err
		}
	}
	if err := register(mgr, opts, kinds.StatefulSet(), func() client.ObjectList { return &v1alpha1.TrellisStatefulSetList{} }, []client.Object{&appsv1.StatefulSet{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}}, clients, events, profiles); err != nil {
		return nil, err
	}
	return mgr, nil
}

// register adds a controller for a kind reconciled by the shared loop.
func register[T client.Object](mgr manager.Manager, opts ctrlcontroller.Options, k workload.Kind[T], newList func() client.ObjectList, owns []client.Object, c workload.Clients, ev events.EventRecorder, p workload.ProfileSource) error {
	b := builder.ControllerManagedBy(mgr).For(k.New()).WithOptions(opts).Named(strings.ToLower(k.Name)).
		Watches(&corev1.ConfigMap{}, enqueueAll(mgr.GetCache(), newList), builder.WithPredicates(isProfile))
	for _, o := range owns {
		b = b.Owns(o)
	}
	if err := b.Complete(&workload.Reconciler[T]{Kind: k, Clients: c, Events: ev, Profiles: p}); err != nil {
		return fmt.Errorf("failed to register %s controller: %w", k.Name, err)
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
