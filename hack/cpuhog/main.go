// Command cpuhog keeps CPUs busy until it gets SIGINT or SIGTERM (or -for
// ends): one goroutine per hog, each spinning on its own OS thread at the
// ordinary priority, so that what runs beside it gets the share of a
// loaded machine. `make test-loaded` runs one hog per core beside `make
// test`; on exit it prints the CPU time it took, to show it really ran.
//
//	go run ./hack/cpuhog -n 2 -for 10m
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/trellis-dev/trellis/internal/procstat"
)

func main() {
	n := flag.Int("n", runtime.NumCPU(), "hogs: goroutines that spin, each on its own thread (default one per CPU)")
	limit := flag.Duration("for", 0, "stop after this long (0: until SIGINT or SIGTERM)")
	flag.Parse()
	if *n < 1 {
		fmt.Fprintf(os.Stderr, "cpuhog: -n %d: want at least 1\n", *n)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *limit)
		defer cancel()
	}
	if runtime.GOMAXPROCS(0) < *n+1 {
		runtime.GOMAXPROCS(*n + 1) // the hogs, and the thread that stops them
	}
	began := time.Now()
	var spins atomic.Int64
	var wg sync.WaitGroup
	for range *n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			for k := int64(0); ; k++ {
				if k%(1<<20) == 0 {
					if ctx.Err() != nil {
						spins.Add(k)
						return
					}
				}
			}
		}()
	}
	fmt.Printf("cpuhog: %d hogs spinning (pid %d)\n", *n, os.Getpid())
	<-ctx.Done()
	wg.Wait()
	wall := time.Since(began)
	cpu, err := procstat.CPUTime(os.Getpid())
	if err != nil {
		fmt.Fprintf(os.Stderr, "cpuhog: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("cpuhog: %d hogs ran %s and took %s of CPU (%.2f CPUs on average)\n",
		*n, wall.Round(time.Second), cpu.Round(time.Second), cpu.Seconds()/wall.Seconds())
}
