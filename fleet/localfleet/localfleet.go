// Package localfleet brings up a fleet on loopback: a Karmada control plane
// and member control planes (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok nodes and the real trellis-controller), joined from
// their definitions with the fleet bundle installed. The fleet tests,
// `make fleet` and the fleet bench run on it.
package localfleet

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/fleet/karmada"
	"github.com/trellis-dev/trellis/internal/controlplane"
	apply "github.com/trellis-dev/trellis/internal/kubeapply"
	"github.com/trellis-dev/trellis/internal/kwok"
)

// Options shape the local fleet.
type Options struct {
	// Members are the member clusters' definitions (name, cloud, region,
	// zones); each gets a control plane of its own.
	Members []*definition.ClusterDefinition
	// Nodes per member, each with NodeCPU cores, NodeMemory and 110 pods.
	Nodes      int
	NodeCPU    string
	NodeMemory string
	// ControllerBinary is the trellis-controller each member runs.
	ControllerBinary string
	// ZooKeeper, when set with RegistrarBinary, is the one ensemble every
	// member's node registrars (one per kwok node) register Ready pods in:
	// the fleet's single discovery view.
	ZooKeeper       []string
	RegistrarBinary string
	// Karmada tunes the fleet's control plane.
	Karmada karmada.Options
	Log     *slog.Logger
}

// Fleet is a running local fleet.
type Fleet struct {
	Karmada *karmada.ControlPlane
	Members []*Member
}

// Member is one member cluster.
type Member struct {
	Name string
	*controlplane.ControlPlane
	Definition *definition.ClusterDefinition
	controller string
}

// ControllerProcess is the member's trellis-controller's process name.
const ControllerProcess = "trellis-controller"

// Up starts the members (in parallel) and the fleet's control plane,
// installs the fleet bundle and joins every member, and returns once each
// is Ready in the fleet. Stop stops everything.
func Up(ctx context.Context, dir string, o Options) (f *Fleet, err error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	f = &Fleet{Members: make([]*Member, len(o.Members))}
	defer func() {
		if err != nil {
			f.Stop()
		}
	}()
	start := time.Now()
	errs := make([]error, len(o.Members)+1)
	var wg sync.WaitGroup
	for i, def := range o.Members {
		wg.Go(func() {
			// Distinct pod addresses per member: 10.128.0.0/16, 10.129.0.0/16 ...
			f.Members[i], errs[i] = StartMember(ctx, filepath.Join(dir, def.Name), def, fmt.Sprintf("10.%d.0.0/16", 128+i), o)
		})
	}
	wg.Go(func() {
		kopts := o.Karmada
		if kopts.Log == nil {
			kopts.Log = o.Log
		}
		f.Karmada, errs[len(o.Members)] = karmada.Start(ctx, filepath.Join(dir, "karmada"), kopts)
	})
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return f, e
		}
	}
	o.Log.Info("fleet control planes up", "members", len(o.Members), "elapsed", time.Since(start).Round(time.Millisecond))
	if _, err := fleet.Install(ctx, f.Karmada.Config); err != nil {
		return f, fmt.Errorf("failed to install the fleet bundle: %w", err)
	}
	for _, m := range f.Members {
		if err := fleet.Join(ctx, f.Karmada.Config, fleet.Member{Definition: m.Definition, Config: m.Config}, fleet.JoinOptions{Wait: 2 * time.Minute, Log: o.Log}); err != nil {
			return f, err
		}
	}
	o.Log.Info("local fleet up", "members", len(o.Members), "elapsed", time.Since(start).Round(time.Millisecond))
	return f, nil
}

func (o *Options) setDefaults() error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ControllerBinary == "" {
		return fmt.Errorf("no trellis-controller binary given (make build puts one in bin/)")
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.NodeCPU == "" {
		o.NodeCPU = "8"
	}
	if o.NodeMemory == "" {
		o.NodeMemory = "32Gi"
	}
	return nil
}

// StartMember starts one member's control plane as Up does (the workload
// CRDs, kwok nodes with pod addresses from podCIDR, its trellis-controller
// and registrars) without joining it: benchmarks use one as the baseline
// of applying to a cluster directly.
func StartMember(ctx context.Context, dir string, def *definition.ClusterDefinition, podCIDR string, o Options) (m *Member, err error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	cp, err := controlplane.Start(dir, controlplane.Options{ControllerManager: true, Scheduler: true})
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", def.Name, err)
	}
	m = &Member{Name: def.Name, ControlPlane: cp, Definition: def, controller: o.ControllerBinary}
	defer func() {
		if err != nil {
			cp.Stop()
			err = fmt.Errorf("member %s: %w", def.Name, err)
		}
	}()
	crds, err := fleet.Bundle()
	if err != nil {
		return nil, err
	}
	var onlyCRDs = crds[:0:0]
	for _, o := range crds {
		if o.GetKind() == "CustomResourceDefinition" {
			onlyCRDs = append(onlyCRDs, o)
		}
	}
	a, err := apply.New(cp.Config, "trellis-addons")
	if err != nil {
		return nil, err
	}
	if err := a.ApplyCRDsFirst(ctx, onlyCRDs...); err != nil {
		return nil, err
	}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: inject.ProfileNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("failed to create namespace %s: %w", inject.ProfileNamespace, err)
	}
	if err := kwok.Start(cp, podCIDR); err != nil {
		return nil, err
	}
	var nodes []string
	for i := range o.Nodes {
		labels := map[string]string{}
		if len(def.Zones) > 0 {
			labels[corev1.LabelTopologyZone] = def.Zones[i%len(def.Zones)]
		}
		n := kwok.Node(fmt.Sprintf("%s-node-%d", def.Name, i), o.NodeCPU, o.NodeMemory, 110, labels)
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("failed to create node %s: %w", n.Name, err)
		}
		nodes = append(nodes, n.Name)
	}
	if len(o.ZooKeeper) > 0 && o.RegistrarBinary != "" {
		ports, err := controlplane.FreePorts(len(nodes))
		if err != nil {
			return nil, err
		}
		for i, n := range nodes {
			if err := cp.StartProcess("zk-registrar-"+n, o.RegistrarBinary, "--node-name="+n, "--kubeconfig="+cp.Kubeconfig,
				"--zookeeper="+strings.Join(o.ZooKeeper, ","), fmt.Sprintf("--listen=127.0.0.1:%d", ports[i])); err != nil {
				return nil, err
			}
		}
	}
	if err := m.StartController(); err != nil {
		return nil, err
	}
	return m, nil
}

// StartController (re)starts the member's trellis-controller.
func (m *Member) StartController() error {
	return m.StartProcess(ControllerProcess, m.controller, "--kubeconfig="+m.Kubeconfig, "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--webhook-port=0", "--kube-api-qps=100", "--kube-api-burst=200")
}

// Stop stops the fleet's control plane, then the members.
func (f *Fleet) Stop() {
	if f.Karmada != nil {
		f.Karmada.Stop()
	}
	for _, m := range f.Members {
		if m != nil {
			m.Stop()
		}
	}
}

// Member returns the member of that name.
func (f *Fleet) Member(name string) *Member {
	for _, m := range f.Members {
		if m != nil && m.Name == name {
			return m
		}
	}
	return nil
}
