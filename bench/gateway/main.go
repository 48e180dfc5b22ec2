// Command gateway measures trellis-gateway on a real control plane, in one
// run: submissions at a steady rate from many identities (the gateway's own
// overhead, from its Server-Timing header, apart from the apiserver's
// work), the memory it takes with many workloads cached, and reads at a
// high rate through it and, side by side, directly against kube-apiserver
// (apiserver requests from the audit log, CPU per process from /proc).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

type options struct {
	identities, namespaces int
	submitRates            []float64
	submitFor              time.Duration
	readRate               float64
	readFor                time.Duration
	workloads              int
	gateway                string
	keep                   bool
}

func main() {
	var o options
	flag.IntVar(&o.identities, "identities", 20, "callers (half with issuer certificates, half with ServiceAccount tokens)")
	flag.IntVar(&o.namespaces, "namespaces", 4, "team namespaces the callers and workloads are spread over")
	rates := flag.String("submit-rates", "50", "submission rates (per second), comma-separated, run one after the other")
	flag.DurationVar(&o.submitFor, "submit-for", 30*time.Second, "how long submissions run")
	flag.Float64Var(&o.readRate, "read-rate", 1000, "reads per second, through the gateway and then directly")
	flag.DurationVar(&o.readFor, "read-for", 20*time.Second, "how long each way of reading runs")
	flag.IntVar(&o.workloads, "workloads", 10000, "workloads in the cache when memory is measured and reads run")
	flag.StringVar(&o.gateway, "gateway", "", "trellis-gateway binary (default: go build ./cmd/trellis-gateway)")
	flag.BoolVar(&o.keep, "keep", false, "keep the run's directory (logs, audit log)")
	flag.Parse()
	for _, r := range strings.Split(*rates, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil || f <= 0 {
			fmt.Fprintf(os.Stderr, "bench/gateway: -submit-rates: bad rate %q\n", r)
			os.Exit(2)
		}
		o.submitRates = append(o.submitRates, f)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "bench/gateway: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "trellis-bench-gateway-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Println("run directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := startEnv(ctx, dir, o.gateway, o.identities, o.namespaces)
	if e != nil && e.cp != nil {
		defer e.cp.Stop()
	}
	if err != nil {
		return err
	}
	b := &bench{o: o, e: e}
	fmt.Printf("trellis-gateway on a real kube-apiserver and etcd; %d identities over %d namespaces\n\n", o.identities, o.namespaces)
	for _, phase := range []func(context.Context) error{b.submissions, b.fill, b.gatewayReads, b.directReads} {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	b.table()
	return nil
}
