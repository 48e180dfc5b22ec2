// Package zkregistrar is the node daemon that registers the Ready pods of
// its node in ZooKeeper serversets. It watches only the pods on its node
// (one field-selected watch, no periodic lists); a pod that opts in through
// the discovery annotations the workload controller writes is registered
// while it is Ready and deregistered when it is not, terminates or goes
// away. The loop is level-triggered: the registrar's desired set is always
// recomputed from the informer's view of the node, so a restart or a missed
// event heals on the next pass.
package zkregistrar

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/nodepods"
	"github.com/trellis-dev/trellis/internal/serverset"
)

// Config configures the daemon; New applies defaults.
type Config struct {
	NodeName  string
	Client    kubernetes.Interface
	Registrar *serverset.Registrar
	// Resync re-derives the desired set from the informer cache this often
	// (no API call), besides every pod event (default 30s).
	Resync time.Duration
	Logger *slog.Logger
}

// Daemon keeps the node's Ready, opted-in pods registered.
type Daemon struct {
	cfg Config
	log *slog.Logger
}

// New returns a Daemon.
func New(cfg Config) (*Daemon, error) {
	if cfg.NodeName == "" || cfg.Client == nil || cfg.Registrar == nil {
		return nil, fmt.Errorf("zkregistrar: NodeName, Client and Registrar are required")
	}
	if cfg.Resync == 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Daemon{cfg: cfg, log: cfg.Logger}, nil
}

// Run watches the node's pods until ctx ends. The Registrar must be running.
func (d *Daemon) Run(ctx context.Context) error {
	inf := nodepods.NewInformer(d.cfg.Client, d.cfg.NodeName)
	kick := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, o any) { poke(o) },
		DeleteFunc: poke,
	}); err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { inf.Run(ctx.Done()) })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	registered := map[string]bool{}
	t := time.NewTicker(d.cfg.Resync)
	defer t.Stop()
	for {
		want := map[string]serverset.Registration{}
		for _, o := range inf.GetStore().List() {
			p := o.(*corev1.Pod)
			regs, err := Registrations(p)
			if err != nil {
				d.log.Warn("not registering pod", "pod", p.Namespace+"/"+p.Name, "err", err)
			}
			for k, r := range regs {
				want[k] = r
			}
		}
		for k, r := range want {
			if err := d.cfg.Registrar.Set(k, r); err != nil {
				d.log.Warn("invalid registration", "key", k, "err", err)
			}
			registered[k] = true
		}
		for k := range registered {
			if _, ok := want[k]; !ok {
				d.cfg.Registrar.Remove(k)
				delete(registered, k)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-t.C:
		}
	}
}

// Registrations are the serverset members a pod should have now: one while
// it is Ready and not terminating, none otherwise, keyed <namespace>/<pod>.
// The first declared port is the service endpoint; every named port is an
// additional endpoint. A pod whose ports annotation does not parse is not
// registered, and the error says why.
func Registrations(p *corev1.Pod) (map[string]serverset.Registration, error) {
	svc := p.Annotations[wellknown.AnnotationDiscoveryService]
	env := p.Annotations[wellknown.AnnotationDiscoveryEnv]
	ports := p.Annotations[wellknown.AnnotationDiscoveryPorts]
	if svc == "" || env == "" || ports == "" || !Serving(p) {
		return nil, nil
	}
	parsed, err := wellknown.ParsePorts(ports)
	if err != nil {
		return nil, fmt.Errorf("failed to parse annotation %s: %w", wellknown.AnnotationDiscoveryPorts, err)
	}
	var shard *int
	if s, err := strconv.Atoi(p.Annotations[wellknown.AnnotationDiscoveryShard]); err == nil {
		shard = &s
	}
	named := make(map[string]serverset.Endpoint, len(parsed))
	for _, port := range parsed {
		named[port.Name] = serverset.Endpoint{Host: p.Status.PodIP, Port: port.Port}
	}
	return map[string]serverset.Registration{p.Namespace + "/" + p.Name: {Service: svc, Env: env, Member: serverset.Member{
		ServiceEndpoint: named[parsed[0].Name], AdditionalEndpoints: named, Status: serverset.StatusAlive, Shard: shard,
	}}}, nil
}

// Serving reports whether a pod should receive traffic: Ready, with an IP,
// and not terminating.
func Serving(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
