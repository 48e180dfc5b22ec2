// Package submit holds `trellis submit`: one workload to trellis-gateway,
// checked and written (or, with --dry-run, checked and diffed).
package submit

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/gateway/api"
	gwclient "github.com/trellis-dev/trellis/gateway/client"
	"github.com/trellis-dev/trellis/internal/pki"
)

// Options of `trellis submit`.
type Options struct {
	// Context is the gateway context file.
	Context string
	// File is the workload (- for stdin).
	File   string
	DryRun bool
	// ID is the submission id: a retry with the same id returns the first
	// result.
	ID string
	// SignKey is a PEM ed25519 private key, SignAs the name the platform
	// lists its public key under.
	SignKey, SignAs string
}

// NewCommand returns `trellis submit`.
func NewCommand(s streams.Streams) *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "submit -f FILE [--dry-run] [--id ID]",
		Short: "Submit a workload through trellis-gateway (checked, then written as you)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Run(cmd.Context(), s, o)
		},
	}
	cmd.Flags().StringVar(&o.Context, "context", gwclient.DefaultContextPath(), "gateway context file (URL, CA, credentials)")
	cmd.Flags().StringVarP(&o.File, "filename", "f", "", "the workload, YAML or JSON (- for stdin)")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "run every check and show the diff against what runs; write nothing")
	cmd.Flags().StringVar(&o.ID, "id", "", "submission id (a retry with the same id returns the first result)")
	cmd.Flags().StringVar(&o.SignKey, "sign-key", "", "PEM ed25519 private key to sign the workload with")
	cmd.Flags().StringVar(&o.SignAs, "sign-as", "", "the key's name in the platform's policy (with --sign-key)")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// Run submits o.File.
func Run(ctx context.Context, s streams.Streams, o *Options) error {
	body, err := readFile(s, o.File)
	if err != nil {
		return err
	}
	gctx, err := gwclient.LoadContext(o.Context)
	if err != nil {
		return err
	}
	c, err := gctx.Client()
	if err != nil {
		return err
	}
	opts, err := o.submitOptions(body)
	if err != nil {
		return err
	}
	res, err := c.Submit(ctx, body, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", o.File, err)
	}
	Print(s.Out, res)
	return nil
}

// submitOptions turns the flags into the gateway's submit options,
// signing body with --sign-key.
func (o *Options) submitOptions(body []byte) (gwclient.SubmitOptions, error) {
	opts := gwclient.SubmitOptions{DryRun: o.DryRun, ID: o.ID}
	if o.SignKey != "" {
		var err error
		if opts.Signature, err = sign(body, o.SignKey, o.SignAs); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

// Print writes a submission's result.
func Print(w io.Writer, res *api.SubmitResult) {
	what := fmt.Sprintf("%s %s/%s", strings.ToLower(res.Kind), res.Namespace, res.Name)
	switch {
	case res.DryRun:
		fmt.Fprintf(w, "%s would be %s (dry run, nothing written)\n", what, res.Action)
	case res.Replayed:
		fmt.Fprintf(w, "%s: submission %s was already accepted (resourceVersion %s); nothing written\n", what, res.SubmissionID, res.ResourceVersion)
	default:
		fmt.Fprintf(w, "%s %s (resourceVersion %s, field manager %s)\n", what, res.Action, res.ResourceVersion, res.FieldManager)
	}
	if res.Placement != "" {
		fmt.Fprintf(w, "placement: %s (the fleet's PropagationPolicy)\n", res.Placement)
	}
	var checks []string
	for _, c := range res.Checks {
		checks = append(checks, c.Name+" "+c.Result)
	}
	if len(checks) > 0 {
		fmt.Fprintf(w, "checks: %s\n", strings.Join(checks, ", "))
	}
	for _, warn := range res.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	if res.Diff != "" {
		fmt.Fprintf(w, "diff (- running, + submitted):\n%s", res.Diff)
	}
}

func readFile(s streams.Streams, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(io.LimitReader(s.In, api.MaxBody+1))
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("failed to read the workload: %w", err)
	}
	return b, nil
}

func sign(body []byte, keyFile, name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("--sign-key needs --sign-as, the key's name in the platform's policy")
	}
	b, err := os.ReadFile(keyFile)
	if err != nil {
		return "", fmt.Errorf("failed to read the signing key: %w", err)
	}
	k, err := pki.ParseKey(b)
	if err != nil {
		return "", fmt.Errorf("signing key %s: %w", keyFile, err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return "", fmt.Errorf("signing key %s is %T, want ed25519", keyFile, k)
	}
	return api.Sign(body, name, ek)
}
