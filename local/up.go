package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/local/kindcluster"
	"github.com/trellis-dev/trellis/local/nodeimage"
)

// SampleImage is the image of config/samples' workload (cmd/trellis-hello).
const SampleImage = "trellis/hello:0.1.0"

// Options are what Up needs besides the definition.
type Options struct {
	// Kubeconfig is where the cluster's kubeconfig is written.
	Kubeconfig string
	// Bin is the directory of the static Trellis binaries the images are
	// built from.
	Bin string
	// Image are the node image's inputs (versions, binaries, cache).
	Image nodeimage.Options
	// Recreate deletes an existing cluster of the same name first.
	Recreate bool
	// Retain keeps a cluster this call created when a later step fails
	// (and the nodes of a failed create), to debug it.
	Retain bool
	// Wait is how long each addon may take to become ready.
	Wait time.Duration
	// Fleet makes the cluster the fleet's management cluster as well: the
	// Karmada addons (FleetAddons) beside the definition's, and the
	// fleet's admin kubeconfig written to FleetKubeconfig (default: beside
	// Kubeconfig, fleet-<name>.kubeconfig), for https://127.0.0.1:5443
	// through `kubectl -n trellis-system port-forward svc/karmada-apiserver
	// 5443`. Up without Fleet on the same cluster prunes them.
	Fleet           bool
	FleetKubeconfig string
	// GatewayContext, when set, is where the gateway context file for
	// `trellis submit` and `trellis workloads` is written (see
	// GatewayContext), with the CA and a dev token beside it.
	GatewayContext string
	// Log receives the details; Out the addon applier's lines.
	Log *slog.Logger
	Out io.Writer
	// Progress, when set, gets a line as each step starts and one with
	// its wall time as it ends (see Progress).
	Progress io.Writer
	// Clock times the steps (default: the real clock).
	Clock clock.PassiveClock
}

// Step is one named part of bringing a cluster up.
type Step struct {
	Name    string
	Execute func(ctx context.Context) error
}

// StepError says which step failed.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("local up: %s: %v", e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// Result is what Up made.
type Result struct {
	Cluster    string
	Kubeconfig string
	NodeImage  string
	// FleetKubeconfig is where the fleet's kubeconfig was written (Fleet).
	FleetKubeconfig string
	// Gateway are the gateway context's files (Options.GatewayContext).
	Gateway *GatewayContextFiles
	// Console is how to open the web console (with GatewayContext).
	Console *ConsoleAccess
	// Created is false when an existing cluster was reused.
	Created bool
	// Steps are the steps run, in order, with their durations.
	Steps []StepTime
}

// StepTime is one step's wall time.
type StepTime struct {
	Name     string
	Duration time.Duration
}

// Up creates (or reuses) the kind cluster of def, loads the Trellis images
// into its nodes and applies the addon bundle. When a step fails after
// this call created the cluster, the cluster is deleted unless o.Retain.
func Up(ctx context.Context, def *definition.ClusterDefinition, o Options) (*Result, error) {
	if def.Cloud != definition.CloudKind {
		return nil, fmt.Errorf("cluster %s: cloud is %q, local clusters need %q", def.Name, def.Cloud, definition.CloudKind)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Image.Log == nil {
		o.Image.Log = o.Log
	}
	if o.Fleet {
		d := *def
		d.Addons = append(slices.Clone(def.Addons), FleetAddons()...)
		def = &d
		if o.FleetKubeconfig == "" {
			o.FleetKubeconfig = filepath.Join(filepath.Dir(o.Kubeconfig), "fleet-"+def.Name+".kubeconfig")
		}
	}
	// Rendering checks the bundle before anything is built or created.
	rendered, err := addons.Render(def, lifecycles()...)
	if err != nil {
		return nil, err
	}
	u := &up{def: def, o: o, rendered: rendered, cluster: kindcluster.New(def.Name, o.Kubeconfig, o.Log)}
	u.cluster.Retain = o.Retain
	res := &Result{Cluster: def.Name, Kubeconfig: o.Kubeconfig}
	res.Steps, err = Run(ctx, u.steps(), o.Clock, o.Log, NewProgress(o.Progress))
	if err != nil {
		if u.created && !o.Retain {
			o.Log.Info("deleting the cluster this run created (--retain keeps it)", "name", def.Name)
			if derr := u.cluster.Delete(); derr != nil {
				err = errors.Join(err, fmt.Errorf("delete cluster %s after failure: %w", def.Name, derr))
			}
		}
		return res, err
	}
	res.NodeImage, res.Created = u.image, u.created
	if o.Fleet {
		res.FleetKubeconfig = o.FleetKubeconfig
	}
	res.Gateway, res.Console = u.gatewayFiles, u.consoleAccess
	return res, nil
}

// Run executes steps in order and stops at the first that fails, which
// the returned *StepError names. It returns the time each step run took,
// and tells p (which may be nil) as each step starts and ends.
func Run(ctx context.Context, steps []Step, c clock.PassiveClock, log *slog.Logger, p *Progress) ([]StepTime, error) {
	var times []StepTime
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return times, &StepError{Step: s.Name, Err: err}
		}
		start := c.Now()
		log.Info("step", "name", s.Name)
		p.Start(s.Name)
		err := s.Execute(ctx)
		took := c.Since(start)
		times = append(times, StepTime{Name: s.Name, Duration: took})
		p.End(s.Name, took, err)
		if err != nil {
			return times, &StepError{Step: s.Name, Err: err}
		}
	}
	return times, nil
}

// up is one run of Up: what its steps share.
type up struct {
	def      *definition.ClusterDefinition
	o        Options
	rendered []addons.Rendered
	cluster  *kindcluster.Cluster
	image    string
	created  bool
	rest     *rest.Config
	client   kubernetes.Interface
	// gatewayFiles are the gateway context's files, once written.
	gatewayFiles *GatewayContextFiles
	// consoleAccess is how to open the console, once set up.
	consoleAccess *ConsoleAccess
}
