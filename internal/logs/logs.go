// Package logs routes the logs of the libraries Trellis drives (kops and
// client-go log through klog) by verbosity: errors only by default, all of
// it from -v 1. The CLI and the benches use it.
package logs

import (
	"flag"
	"fmt"
	"io"
	"strconv"

	"k8s.io/klog/v2"
)

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
	if verbosity > 0 {
		klog.SetOutput(stderr)
	} else {
		klog.SetOutput(io.Discard)
	}
	return nil
}
