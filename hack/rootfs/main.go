// Command rootfs makes the Debian root filesystems of a local cluster (the
// kind node's and ZooKeeper's) in the Trellis cache, both at once.
// hack/local.sh runs it beside the compiles of `make local`; `trellis
// local up` then finds them made. It imports only the standard library and
// local/rootfs, so that it starts within seconds on a cold build cache.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/trellis-dev/trellis/local/rootfs"
)

func main() {
	home, _ := os.UserHomeDir()
	cache := os.Getenv("TRELLIS_CACHE")
	if cache == "" {
		cache = filepath.Join(home, ".cache", "trellis")
	}
	flag.StringVar(&cache, "cache", cache, "the Trellis cache ($TRELLIS_CACHE)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	o := rootfs.Options{Cache: cache, Log: log}
	sets := []struct {
		name     string
		packages []string
	}{{"node", rootfs.Node}, {"zookeeper", rootfs.ZooKeeper}}
	errs := make([]error, len(sets))
	var wg sync.WaitGroup
	for i, s := range sets {
		wg.Go(func() {
			start := time.Now()
			dir, err := rootfs.Build(ctx, o, s.packages)
			if err != nil {
				errs[i] = fmt.Errorf("the %s rootfs: %w", s.name, err)
				return
			}
			fmt.Printf(" ✓ %s rootfs %s (%s)\n", s.name, dir, time.Since(start).Round(time.Second))
		})
	}
	wg.Wait()
	failed := false
	for _, err := range errs {
		if err != nil {
			fmt.Fprintln(os.Stderr, "rootfs:", err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}
