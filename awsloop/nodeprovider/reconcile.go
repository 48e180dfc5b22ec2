package nodeprovider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Options of a Reconciler.
type Options struct {
	EC2 EC2
	// Cluster is the kops cluster name (the instances' KubernetesCluster tag).
	Cluster string
	// Kind is the local kind cluster the nodes join.
	Kind string
	Kube kubernetes.Interface
	// NodeLogs, when set, is a host directory that keeps each instance
	// node's /var/log/trellis (the log shipper's file sink) under
	// <NodeLogs>/<instance id>, so what a node shipped outlives it, as a
	// log service keeps what terminated instances sent.
	NodeLogs string
	// Interval between passes (default 1s); JoinTimeout bounds one node's
	// start and join (default 5m).
	Interval, JoinTimeout time.Duration
	Log                   *slog.Logger
	Clock                 clock.Clock
}

// Reconciler keeps one node container per running instance.
type Reconciler struct {
	o Options
	// One launch at a time: image loading and kubeadm join are heavy on
	// two cores, and kubeadm serializes joins anyway.
	launch sync.Mutex
	mu     sync.Mutex
	busy   map[string]bool
	failed map[string]string
}

// New returns a reconciler.
func New(o Options) *Reconciler {
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.JoinTimeout == 0 {
		o.JoinTimeout = 5 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Reconciler{o: o, busy: map[string]bool{}, failed: map[string]string{}}
}

// Run reconciles every Interval until ctx ends; a failed pass is logged and
// retried.
func (r *Reconciler) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		if err := r.Sync(ctx, &wg); err != nil && ctx.Err() == nil {
			r.o.Log.Error("instance nodes: pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.o.Clock.After(r.o.Interval):
		}
	}
}

// RemoveAll removes every instance node of the kind cluster: the
// instances go with the emulator that held them.
func (r *Reconciler) RemoveAll(ctx context.Context) error {
	ctrs, err := containers(ctx, r.o.Kind)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range ctrs {
		errs = append(errs, r.remove(ctx, c))
	}
	return errors.Join(errs...)
}

// Sync runs one pass: containers for new running instances (started in
// wg), none for gone ones.
func (r *Reconciler) Sync(ctx context.Context, wg *sync.WaitGroup) error {
	insts, err := instances(ctx, r.o.EC2, r.o.Cluster)
	if err != nil {
		return err
	}
	ctrs, err := containers(ctx, r.o.Kind)
	if err != nil {
		return err
	}
	var errs []error
	for id, c := range ctrs {
		if inst, ok := insts[id]; ok && inst.running() {
			continue
		}
		if err := r.remove(ctx, c); err != nil {
			errs = append(errs, err)
		}
	}
	for id, inst := range insts {
		if _, ok := ctrs[id]; ok || !inst.running() {
			continue
		}
		r.mu.Lock()
		start := !r.busy[id]
		r.busy[id] = true
		r.mu.Unlock()
		if start {
			wg.Go(func() { r.create(ctx, inst) })
		}
	}
	return errors.Join(errs...)
}

// remove deletes a gone instance's container and its Node.
func (r *Reconciler) remove(ctx context.Context, c container) error {
	r.o.Log.Info("instance gone: removing its node", "instance", c.Instance, "container", c.Name)
	if _, err := docker(ctx, nil, "rm", "-f", "-v", c.Name); err != nil {
		return err
	}
	err := r.o.Kube.CoreV1().Nodes().Delete(ctx, c.Instance, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete node %s: %w", c.Instance, err)
	}
	return nil
}

// create starts and joins an instance's node; a failure removes the
// container so a later pass tries again.
func (r *Reconciler) create(ctx context.Context, inst Instance) {
	defer func() {
		r.mu.Lock()
		delete(r.busy, inst.ID)
		r.mu.Unlock()
	}()
	r.launch.Lock()
	defer r.launch.Unlock()
	start := r.o.Clock.Now()
	name := r.o.Kind + "-" + inst.ID
	log := r.o.Log.With("instance", inst.ID, "group", inst.Group, "image", inst.Image)
	err := r.join(ctx, name, inst, log)
	if err != nil {
		if ctx.Err() == nil {
			log.Error("instance node failed: it is removed and retried", "err", err)
		}
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_, _ = docker(rmCtx, nil, "rm", "-f", "-v", name)
		return
	}
	log.Info("instance joined as a node", "took", r.o.Clock.Since(start).Round(time.Millisecond))
}

func (r *Reconciler) join(ctx context.Context, name string, inst Instance, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, r.o.JoinTimeout)
	defer cancel()
	image, err := nodeImage(ctx, r.o.EC2, inst.Image)
	if err != nil {
		return err
	}
	s, err := workerShape(ctx, r.o.Kind)
	if err != nil {
		return err
	}
	log.Info("starting a node container", "container", name, "nodeImage", image)
	// docker run is not cancelled half-way: a client killed while the
	// daemon creates the container can leave it behind the cleanup's rm
	// (seen on Stop mid-launch). It finishes, then ctx is checked.
	runCtx, cancelRun := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	if r.o.NodeLogs != "" {
		dir := filepath.Join(r.o.NodeLogs, inst.ID)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			cancelRun()
			return fmt.Errorf("failed to create the node log directory %s: %w", dir, err)
		}
		s.Binds = append(s.Binds, dir+":/var/log/trellis")
	}
	_, err = docker(runCtx, nil, runArgs(r.o.Kind, name, inst, image, s)...)
	cancelRun()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := waitContainerd(ctx, name, time.Minute); err != nil {
		return err
	}
	if err := copyContainerdConfig(ctx, r.o.Kind, name); err != nil {
		return err
	}
	if err := copyImages(ctx, r.o.Kind, name); err != nil {
		return err
	}
	ip, err := docker(ctx, nil, "inspect", "--format", "{{.NetworkSettings.Networks.kind.IPAddress}}", name)
	if err != nil {
		return err
	}
	token, err := joinToken(ctx, r.o.Kind)
	if err != nil {
		return err
	}
	cfg, err := joinConfig(r.o.Kind, token, ip, inst)
	if err != nil {
		return err
	}
	if _, err := docker(ctx, strings.NewReader(string(cfg)), "exec", "-i", name, "sh", "-c", "cat > /kind/trellis-join.yaml"); err != nil {
		return err
	}
	if _, err := docker(ctx, nil, "exec", name, "kubeadm", "join", "--config", "/kind/trellis-join.yaml"); err != nil {
		return fmt.Errorf("kubeadm join: %w", err)
	}
	return nil
}
