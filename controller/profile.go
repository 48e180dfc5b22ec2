// Package controller wires the Trellis workload reconcilers into a
// controller-runtime manager with the platform's client discipline.
package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/controller/inject"
)

// CachedProfile reads the runtime profile ConfigMap from the informer cache.
type CachedProfile struct {
	Reader client.Reader
}

// Get returns the cluster's runtime profile, or the default when there is none.
func (p CachedProfile) Get(ctx context.Context) (*inject.Profile, error) {
	cm := &corev1.ConfigMap{}
	err := p.Reader.Get(ctx, client.ObjectKey{Namespace: inject.ProfileNamespace, Name: inject.ProfileName}, cm)
	if apierrors.IsNotFound(err) {
		return inject.DefaultProfile(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read runtime profile: %w", err)
	}
	return inject.ParseProfile([]byte(cm.Data[inject.ProfileKey]))
}

// For always returns the current profile: CachedProfile does no gradual
// rollout (ProfileRollout does).
func (p CachedProfile) For(ctx context.Context, _, _ string) (*inject.Profile, time.Duration, error) {
	prof, err := p.Get(ctx)
	return prof, 0, err
}
