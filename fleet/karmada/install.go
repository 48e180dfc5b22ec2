package karmada

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	apply "github.com/trellis-dev/trellis/internal/kubeapply"
)

// InstallOptions say where Karmada's components are, seen from its
// apiserver, for Install.
type InstallOptions struct {
	// ManifestDir holds manifests/: Karmada's CRDs and webhook
	// configuration as hack/build-karmada.sh copies them (BinDir() does).
	ManifestDir string
	// WebhookURL is karmada-webhook's base URL; AggregatedHost and
	// AggregatedPort karmada-aggregated-apiserver's address.
	WebhookURL     string
	AggregatedHost string
	AggregatedPort int
	// CAPEM signed both servers' certificates.
	CAPEM []byte
	// Wait is how long to wait for the apiserver to answer, the webhook to
	// admit and the aggregated API to be served (0: try once).
	Wait time.Duration
	Log  *slog.Logger
}

// Install makes a Karmada apiserver (a stock kube-apiserver) serve
// Karmada's API, as karmadactl init and Karmada's chart's post-install job
// do: the karmada-system and karmada-cluster namespaces, every CRD (with
// the bindings' conversion webhook), the cluster.karmada.io APIService of
// the aggregated apiserver, and the webhook configurations. It is safe to
// repeat, and retries until Wait is spent: its components may still be
// starting.
func Install(ctx context.Context, cfg *rest.Config, o InstallOptions) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	crdObjs, err := crds(o.ManifestDir, o.WebhookURL, o.CAPEM)
	if err != nil {
		return err
	}
	hooks, err := webhookConfigs(o.ManifestDir, o.WebhookURL, o.CAPEM)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create a client for the Karmada API: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create a dynamic client for the Karmada API: %w", err)
	}
	a, err := apply.New(cfg, FieldManager)
	if err != nil {
		return err
	}
	steps := []struct {
		name string
		do   func(context.Context) error
	}{
		{"namespaces", func(ctx context.Context) error { return ensureNamespaces(ctx, cs) }},
		{"CRDs", func(ctx context.Context) error { return a.ApplyCRDsFirst(ctx, crdObjs...) }},
		{"aggregated API", func(ctx context.Context) error {
			if err := a.Apply(ctx, aggregation(o.AggregatedHost, o.AggregatedPort, o.CAPEM)...); err != nil {
				return err
			}
			if _, err := dyn.Resource(ClusterGVR).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				return fmt.Errorf("list the clusters through the aggregated API: %w", err)
			}
			return nil
		}},
		{"webhook configurations", func(ctx context.Context) error { return a.Apply(ctx, hooks...) }},
	}
	for _, s := range steps {
		if err := Retry(ctx, o.Wait, func(ctx context.Context) error {
			err := s.do(ctx)
			if err != nil {
				o.Log.Info("karmada install: retrying", "step", s.name, "err", err)
			}
			return err
		}); err != nil {
			return fmt.Errorf("karmada install, %s: %w", s.name, err)
		}
		o.Log.Info("karmada install", "step", s.name, "done", true)
	}
	return nil
}

// Retry calls f every second until it succeeds or wait is spent, and returns
// its last error; with no wait, it calls f once.
func Retry(ctx context.Context, wait time.Duration, f func(context.Context) error) error {
	if wait <= 0 {
		return f(ctx)
	}
	deadline := time.Now().Add(wait)
	for {
		err := f(ctx)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// ensureNamespaces creates the namespaces Karmada keeps its own objects in.
func ensureNamespaces(ctx context.Context, cs kubernetes.Interface) error {
	for _, ns := range []string{SystemNamespace, ClusterNamespace} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create namespace %s: %w", ns, err)
		}
	}
	return nil
}
