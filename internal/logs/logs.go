// Package logs routes the logs of the libraries Trellis drives (kops and
// client-go log through klog) by verbosity: errors only by default, all of
// it from -v 1. The CLI and the benches use it.
package logs

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"

	"k8s.io/klog/v2"
)

var quiet atomic.Bool

// Quiet reports whether Setup discards the libraries' info and warning
// logs (verbosity 0), so a caller that wants some of them must tap klog.
func Quiet() bool { return quiet.Load() }

// Setup configures klog for a command run.
func Setup(verbosity int, stderr io.Writer) error {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	set := map[string]string{
		"v":               strconv.Itoa(max(verbosity-1, 0)),
		"logtostderr":     strconv.FormatBool(verbosity > 0),
		"stderrthreshold": "ERROR",
		"skip_headers":    strconv.FormatBool(verbosity == 0),
	}
	for k, v := range set {
		if err := fs.Set(k, v); err != nil {
			return fmt.Errorf("failed to set klog flag %s: %w", k, err)
		}
	}
	quiet.Store(verbosity == 0)
	if verbosity > 0 {
		klog.SetOutput(stderr)
	} else {
		klog.SetOutput(io.Discard)
	}
	return nil
}

// SetVModule sets klog's per-file verbosity (its -vmodule flag, for
// example "executor=2"); "" clears it.
func SetVModule(spec string) error {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("vmodule", spec); err != nil {
		return fmt.Errorf("failed to set klog's vmodule to %q: %w", spec, err)
	}
	return nil
}
