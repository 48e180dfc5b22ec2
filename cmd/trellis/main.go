// Command trellis bootstraps Kubernetes clusters on AWS with kops and wires
// the Trellis platform runtime into every cluster.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	// The quota watch runs from a scratch image: the time zones of its
	// business hours come with the binary.
	_ "time/tzdata"

	"github.com/trellis-dev/trellis/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
