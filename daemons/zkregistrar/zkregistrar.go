// Package zkregistrar is the node daemon that registers the Ready pods of
// its node in ZooKeeper serversets. It watches only the pods on its node
// (one field-selected watch, no periodic lists); a pod that opts in through
// the discovery annotations the workload controller writes is registered
// while it is Ready and deregistered when it is not, terminates or goes
// away. A pod with the trellis.dev/registered readiness gate is registered
// once its containers are Ready, and the registrar then opens the gate, so
// that the pod turns Ready only once clients can find it (see Gate). The
// loop is level-triggered: the registrar's desired set is always
// recomputed from the informer's view of the node, so a restart or a missed
// event heals on the next pass.
package zkregistrar

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

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
	// Clock stamps the readiness-gate condition (default: the real clock).
	Clock  clock.PassiveClock
	Logger *slog.Logger
}

// Daemon keeps the node's Ready, opted-in pods registered.
type Daemon struct {
	cfg Config
	log *slog.Logger
	// gateWrites counts pods/status patches of the readiness gate.
	gateWrites atomic.Int64
}

// GateWrites is the number of readiness-gate condition writes sent so far.
func (d *Daemon) GateWrites() int64 { return d.gateWrites.Load() }

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
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
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
		return fmt.Errorf("watch pods: %w", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { inf.Run(ctx.Done()) })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	registered := map[string]bool{}
	// written: the gate condition this process last wrote per pod, until
	// the informer shows it.
	written := map[types.UID]writtenGate{}
	t := time.NewTicker(d.cfg.Resync)
	defer t.Stop()
	for {
		want := map[string]serverset.Registration{}
		pods := inf.GetStore().List()
		invalid := map[string]error{}
		for _, o := range pods {
			p := o.(*corev1.Pod)
			regs, err := Registrations(p)
			if err != nil {
				invalid[p.Namespace+"/"+p.Name] = err
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
		d.syncGates(ctx, pods, invalid, written)
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-d.cfg.Registrar.Changes():
		case <-t.C:
		}
	}
}

type writtenGate struct {
	status corev1.ConditionStatus
	reason string
}

// syncGates sets the readiness-gate condition of every gated pod of the
// node from what ZooKeeper holds (see Gate). A failed write is retried on
// the next pass.
func (d *Daemon) syncGates(ctx context.Context, pods []any, invalid map[string]error, written map[types.UID]writtenGate) {
	inZK := d.cfg.Registrar.Registered()
	lost, timeout := d.cfg.Registrar.SessionLost(), d.cfg.Registrar.SessionTimeout()
	seen := make(map[types.UID]bool, len(pods))
	for _, o := range pods {
		p := o.(*corev1.Pod)
		if !Gated(p) || !discoveryAnnotated(p) {
			continue
		}
		seen[p.UID] = true
		key := p.Namespace + "/" + p.Name
		in := GateInput{Serving: Serving(p), Invalid: invalid[key], SessionLost: lost, SessionTimeout: timeout}
		_, in.Registered = inZK[key]
		if c := gateCondition(p); c != nil {
			in.Current, in.CurrentReason = c.Status, c.Reason
		}
		if w, ok := written[p.UID]; ok {
			if w.status == in.Current && w.reason == in.CurrentReason {
				delete(written, p.UID) // the informer caught up
			} else {
				in.Current, in.CurrentReason = w.status, w.reason
			}
		}
		status, reason, msg, change := Gate(in)
		if !change {
			continue
		}
		d.gateWrites.Add(1)
		if err := d.patchGate(ctx, p, status, reason, msg); err != nil {
			d.log.Warn("readiness gate not written; will retry", "pod", key, "err", err)
			continue
		}
		written[p.UID] = writtenGate{status: status, reason: reason}
		d.log.Info("readiness gate", "pod", key, "status", status, "reason", reason)
	}
	for uid := range written {
		if !seen[uid] {
			delete(written, uid)
		}
	}
}

func discoveryAnnotated(p *corev1.Pod) bool {
	return p.Annotations[wellknown.AnnotationDiscoveryService] != "" && p.Annotations[wellknown.AnnotationDiscoveryEnv] != "" &&
		p.Annotations[wellknown.AnnotationDiscoveryPorts] != ""
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

// Serving reports whether a pod should receive traffic: running with an IP,
// not terminating, and Ready; for a pod with the trellis.dev/registered
// gate, whose Ready waits for its registration, ContainersReady instead.
func Serving(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
		return false
	}
	want := corev1.PodReady
	if Gated(p) {
		want = corev1.ContainersReady
	}
	for _, c := range p.Status.Conditions {
		if c.Type == want {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
