// Package awsloop runs the production path on this machine: the AWS API
// emulator, a kops cluster created in it from an AWS definition through the
// real SDK, and its node instances as kind nodes of the local cluster
// (awsloop/nodeprovider), until stopped.
package awsloop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/awsloop/nodeprovider"
	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/internal/awsemu"
)

// Options of Up.
type Options struct {
	// Kind is the local kind cluster (`trellis local up`) whose control
	// plane the instances join.
	Kind       string
	Kubeconfig string
	// StateStore is the kops state store in the emulator's S3.
	StateStore string
	// Port of the emulator on 127.0.0.1 (0: a free one).
	Port int
	// EnvFile receives the environment to use the cluster from another
	// shell (TRELLIS_AWS_EMULATOR, KOPS_STATE_STORE, KUBECONFIG).
	EnvFile string
	// NodeLogs keeps each instance node's shipped logs under
	// <NodeLogs>/<instance id> on the host (emptied at start: the
	// instances of an earlier emulator are gone); empty: not kept.
	NodeLogs string
	Out      io.Writer
	Log      *slog.Logger
	// Ready is called once the cluster is created and nodes are being made.
	Ready func(emulatorURL string)
}

// Up starts the emulator, registers the kind node image as an AMI behind
// every ssm: image of def, creates the cluster (`cluster create --yes`) and
// turns its instances into nodes until ctx ends. The emulator, and all it
// holds, goes with it.
func Up(ctx context.Context, def *definition.ClusterDefinition, o Options) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	params, err := imageParameters(def)
	if err != nil {
		return err
	}
	bucket, err := bucketOf(o.StateStore)
	if err != nil {
		return err
	}
	emu, err := awsemu.Start(ctx, awsemu.Options{Port: o.Port, Log: o.Log})
	if err != nil {
		return err
	}
	defer emu.Stop()
	if err := (bootstrap.Env{Emulator: emu.URL, Region: def.Region}).Setup(); err != nil {
		return err
	}
	c := awsemu.NewClients(emu.URL, def.Region)
	if err := c.Bucket(ctx, bucket); err != nil {
		return err
	}
	base, err := nodeprovider.KindNodeImage(ctx, o.Kind)
	if err != nil {
		return err
	}
	ami, image, err := nodeprovider.RegisterNodeImage(ctx, c.EC2, base, fmt.Sprintf("node-%d", time.Now().Unix()))
	if err != nil {
		return err
	}
	for _, p := range params {
		if err := c.Parameter(ctx, p, ami); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.Out, "AWS API emulator at %s; node image %s registered as %s (%s)\n", emu.URL, image, ami, strings.Join(params, ", "))
	start := time.Now()
	if _, err := bootstrap.Create(ctx, def, bootstrap.ApplyOptions{StateStore: o.StateStore, Yes: true, Out: o.Out}); err != nil {
		return err
	}
	name := render.ClusterName(def)
	fmt.Fprintf(o.Out, "Created %s in the emulator in %s\n", name, time.Since(start).Round(time.Millisecond))
	if o.EnvFile != "" {
		if err := writeEnv(o.EnvFile, emu.URL, o.StateStore, o.Kubeconfig); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "From another shell: . %s\n", o.EnvFile)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
	}
	cfg.UserAgent = "trellis-aws-nodes"
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("failed to create a Kubernetes client from %s: %w", o.Kubeconfig, err)
	}
	if o.NodeLogs != "" {
		if err := os.RemoveAll(o.NodeLogs); err != nil {
			return fmt.Errorf("failed to clear the node log directory %s: %w", o.NodeLogs, err)
		}
	}
	r := nodeprovider.New(nodeprovider.Options{EC2: c.EC2, Cluster: name, Kind: o.Kind, Kube: kc, NodeLogs: o.NodeLogs, Log: o.Log})
	// Instance nodes left by an earlier run (killed before its cleanup)
	// belong to an emulator that is gone.
	if err := r.RemoveAll(ctx); err != nil {
		return fmt.Errorf("remove the instance nodes of an earlier run: %w", err)
	}
	if o.Ready != nil {
		o.Ready(emu.URL)
	}
	err = r.Run(ctx)
	// The instances go with the emulator: so do their nodes.
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	fmt.Fprintln(o.Out, "Stopping: removing the instance nodes")
	err = errors.Join(err, r.RemoveAll(cleanup))
	n, rerr := nodeprovider.RemoveNodeImages(cleanup)
	o.Log.Info("removed the node images of the emulator's AMIs", "images", n)
	return errors.Join(err, rerr)
}

// imageParameters are the SSM parameters behind def's images; a local AWS
// definition names its images only that way, so Up can point them at the
// image it registers.
func imageParameters(def *definition.ClusterDefinition) ([]string, error) {
	images := []string{def.ControlPlane.Image}
	for _, ig := range def.InstanceGroups {
		images = append(images, ig.Image)
	}
	var out []string
	for _, img := range images {
		p, ok := strings.CutPrefix(img, "ssm:")
		if !ok {
			return nil, fmt.Errorf("image %q: a local AWS definition names its images by ssm: parameters, which `local aws` points at the node image it registers", img)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func bucketOf(store string) (string, error) {
	u, err := url.Parse(store)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return "", errors.Join(fmt.Errorf("state store %q: want s3://bucket/prefix in the emulator", store), err)
	}
	return u.Host, nil
}

func writeEnv(path, emulator, store, kubeconfig string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("failed to create the directory of env file %s: %w", path, err)
	}
	body := fmt.Sprintf("export TRELLIS_AWS_EMULATOR=%s KOPS_STATE_STORE=%s KUBECONFIG=%s\n", emulator, store, kubeconfig)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		return fmt.Errorf("failed to write env file %s: %w", path, err)
	}
	return nil
}
