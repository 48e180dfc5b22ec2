// Package cluster holds `trellis cluster` and its subcommands.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/spf13/cobra"
	"k8s.io/kops/upup/pkg/fi"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/streams"
)

// ErrNotValid is returned when a cluster fails validation.
var ErrNotValid = errors.New("cluster is not valid")

// OfflineCloud builds a cloud that stands in for AWS for one command: a
// test build's in-memory fake. The product binary has none.
type OfflineCloud func(def *definition.ClusterDefinition) (fi.Cloud, error)

// Options are what the process wires into `trellis cluster`.
type Options struct {
	// OfflineCloud, when set, adds --fake-aws (plan and apply against it)
	// and is what a plan without AWS credentials validates against. Only
	// test builds set it (test/cmd/trellis-fakeaws, the package's tests):
	// no product package links a fake.
	OfflineCloud OfflineCloud
}

// NewCommand returns `trellis cluster`.
func NewCommand(s streams.Streams, o Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Render, create, diff, update, upgrade, validate and delete clusters from their definitions; export kubeconfigs",
	}
	cmd.AddCommand(newRenderCommand(s), newCreateCommand(s, o), newDiffCommand(s, o), newUpdateCommand(s, o), newUpgradeCommand(s, o), newValidateCommand(s), newDeleteCommand(s), newKubeconfigCommand(s))
	return cmd
}

// stateFlags are the flags every state-store command takes.
type stateFlags struct {
	File        string
	State       string
	FakeAWS     bool
	Emulator    string
	TaskTimeout time.Duration
	Progress    time.Duration
	// offline is the process's OfflineCloud (nil: no --fake-aws).
	offline OfflineCloud
}

func newStateFlags(o Options) stateFlags { return stateFlags{offline: o.OfflineCloud} }

func (f *stateFlags) add(cmd *cobra.Command) {
	flags.Cluster(cmd, &f.File, &f.State, &f.Emulator)
	if f.offline != nil {
		cmd.Flags().BoolVar(&f.FakeAWS, "fake-aws", false, "plan and apply against kops's in-memory AWS fake (cloudmock) instead of AWS: for offline demos and tests; nothing is created anywhere")
		cmd.MarkFlagsMutuallyExclusive("fake-aws", "aws-emulator")
	}
	cmd.Flags().DurationVar(&f.TaskTimeout, "task-timeout", 10*time.Minute, "how long kops retries ONE failing cloud task before the command fails and restores the state store; it bounds each task, not the command (tasks that wait on each other can each take it)")
	cmd.Flags().DurationVar(&f.Progress, "progress-interval", 30*time.Second, "while kops retries, print each still-failing task and its last error this often")
	_ = cmd.Flags().MarkHidden("progress-interval")
}

func loadAWS(file string) (*definition.Loaded, error) {
	l, err := definition.Load(file)
	if err != nil {
		return nil, err
	}
	if l.Cloud != definition.CloudAWS {
		return nil, fmt.Errorf("%s: cloud %q has no kops state store; use `trellis local up` for kind clusters", file, l.Cloud)
	}
	return l, nil
}

// loadAWSEnv loads an AWS definition and points kops and the SDK at the
// emulator, or at AWS. With need set (the command's name), AWS without
// credentials is an error; with the emulator a note says nothing reaches AWS.
func loadAWSEnv(ctx context.Context, file, emulator string, s streams.Streams, need string) (*definition.Loaded, error) {
	l, err := loadAWS(file)
	if err != nil {
		return nil, err
	}
	if err := (bootstrap.Env{Emulator: emulator, Region: l.Region}).Setup(); err != nil {
		return nil, err
	}
	if need == "" {
		return l, nil
	}
	if emulator != "" {
		fmt.Fprintf(s.Err, "Note: AWS is the emulator at %s; nothing reaches AWS.\n", emulator)
	} else if ok, why := haveAWSCredentials(ctx); !ok {
		return nil, fmt.Errorf("%s: %s needs AWS", why, need)
	}
	return l, nil
}

// applyOptions prepares kops and the cloud for a definition. With --fake-aws
// the cloud is the offline one (a test build's fake); otherwise it is AWS,
// reached with the SDK's default credential chain.
//
// Without credentials nothing is sent to AWS: with specsOnly the cloud step
// is skipped (the definition is still validated: against the offline cloud
// when the process has one, else kops's checks that need no cloud),
// otherwise it is an error.
func (f *stateFlags) applyOptions(ctx context.Context, def *definition.ClusterDefinition, s streams.Streams, specsOnly bool) (bootstrap.ApplyOptions, error) {
	opts := bootstrap.ApplyOptions{StateStore: f.State, Out: s.Out, TaskTimeout: f.TaskTimeout, Progress: f.Progress}
	if f.FakeAWS && f.Emulator != "" {
		return opts, fmt.Errorf("--fake-aws and --aws-emulator (or $%s) exclude each other", bootstrap.EmulatorEnv)
	}
	if err := (bootstrap.Env{OfflineAssets: f.FakeAWS, Emulator: f.Emulator, Region: def.Region}).Setup(); err != nil {
		return opts, err
	}
	if f.Emulator != "" {
		fmt.Fprintf(s.Err, "Note: AWS is the emulator at %s (offline kops assets); nothing reaches AWS.\n", f.Emulator)
	}
	if !f.FakeAWS {
		ok, why := haveAWSCredentials(ctx)
		if ok {
			return opts, nil
		}
		if !specsOnly {
			return opts, fmt.Errorf("%s: this command needs AWS (or --aws-emulator for an AWS API emulator)", why)
		}
		fmt.Fprintf(s.Err, "Note: %s; storing specs without a cloud plan.\n", why)
		opts.SpecsOnly = true
		if f.offline == nil {
			return opts, nil
		}
	}
	cloud, err := f.offline(def)
	if err != nil {
		return opts, fmt.Errorf("failed to start the offline cloud for %s: %w", def.Name, err)
	}
	opts.Cloud = cloud
	return opts, nil
}

// haveAWSCredentials reports whether the SDK's default chain yields
// credentials, within a short bound (offline, the instance-metadata lookup
// would otherwise hang).
func haveAWSCredentials(ctx context.Context) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var optFns []func(*config.LoadOptions) error
	if !onEC2() {
		// Only an EC2 instance has an instance-metadata service to ask.
		optFns = append(optFns, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	cfg, err := config.LoadDefaultConfig(ctx, optFns...)
	if err != nil {
		return false, err.Error()
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return false, "no AWS credentials found"
	}
	return true, ""
}

// onEC2 reports whether this machine is an EC2 instance, from what the
// hypervisor tells the kernel (no network request).
func onEC2() bool {
	for _, f := range []string{"/sys/class/dmi/id/board_vendor", "/sys/class/dmi/id/sys_vendor"} {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "Amazon EC2") {
			return true
		}
	}
	if b, err := os.ReadFile("/sys/hypervisor/uuid"); err == nil && strings.HasPrefix(strings.ToLower(string(b)), "ec2") {
		return true
	}
	return false
}
