// Command trellis-fakeaws is the trellis command with kops's in-memory AWS
// fake wired in as `trellis cluster`'s offline cloud: `--fake-aws` plans
// and applies against it, for `make fake-aws` and offline demos. It is a
// test build; the product binary (cmd/trellis) links no fake.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/trellis-dev/trellis/cli"
	"github.com/trellis-dev/trellis/cli/cluster"
	"github.com/trellis-dev/trellis/test/fakes/fakeaws"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.MainWith(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr},
		cli.Options{Cluster: cluster.Options{OfflineCloud: fakeaws.OfflineCloud}})
	stop()
	os.Exit(code)
}
