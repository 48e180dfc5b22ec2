package zkregistrar

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ElectionConfig is the Lease the registrars elect their sweeper with.
type ElectionConfig struct {
	Client    kubernetes.Interface
	Namespace string
	// Name of the coordination.k8s.io Lease (default trellis-zk-registrar-sweeper).
	Name string
	// Identity of this candidate: its node name.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod as in client-go's
	// leaderelection (defaults 15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// RunElected runs the sweeper while this registrar holds the Lease, and
// stands again whenever it loses it, until ctx ends.
func RunElected(ctx context.Context, cfg ElectionConfig, s *Sweeper) error {
	if cfg.Name == "" {
		cfg.Name = "trellis-zk-registrar-sweeper"
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
			Client:     cfg.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
		},
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				s.log.Info("leading the sweep", "lease", cfg.Namespace+"/"+cfg.Name)
				_ = s.Run(ctx)
			},
			OnStoppedLeading: func() { s.log.Info("no longer leading the sweep") },
		},
	})
	if err != nil {
		return fmt.Errorf("failed to set up the sweeper's lease %s/%s: %w", cfg.Namespace, cfg.Name, err)
	}
	for ctx.Err() == nil {
		le.Run(ctx)
	}
	return nil
}
