package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"time"

	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/procstat"
)

// cpuSample is the CPU time each process has used so far: the control
// plane's components, and this process (loader, watcher and controller).
type cpuSample map[string]time.Duration

func sampleCPU(cp *controlplane.ControlPlane) cpuSample {
	s := cpuSample{"bench (loader, watcher, trellis-controller)": cpuTime(os.Getpid())}
	for name, pid := range cp.PIDs() {
		s[name] = cpuTime(pid)
	}
	return s
}

// printCPU prints the CPU each process used between two samples, as a
// share of the wall time: on 2 cores the sum cannot pass 200%.
func printCPU(title string, from, to cpuSample, wall time.Duration) {
	names := make([]string, 0, len(to))
	for n := range to {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return to[names[i]]-from[names[i]] > to[names[j]]-from[names[j]] })
	var total time.Duration
	fmt.Printf("%s CPU over %.1fs wall:\n", title, wall.Seconds())
	for _, n := range names {
		d := to[n] - from[n]
		total += d
		fmt.Printf("  %-45s %6.1fs  %4.0f%%\n", n, d.Seconds(), 100*d.Seconds()/wall.Seconds())
	}
	fmt.Printf("  %-45s %6.1fs  %4.0f%%\n", "all", total.Seconds(), 100*total.Seconds()/wall.Seconds())
}

// cpuTime is pid's CPU time, 0 if it has exited.
func cpuTime(pid int) time.Duration {
	d, _ := procstat.CPUTime(pid)
	return d
}

// apiserverProfile writes kube-apiserver's CPU profile over d to path.
func apiserverProfile(ctx context.Context, cp *controlplane.ControlPlane, path string, d time.Duration) error {
	hc, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", cp.APIURL, int(d.Seconds())), nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("apiserver profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("apiserver profile: %s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("apiserver profile: %w", err)
	}
	return os.WriteFile(path, b, 0o644)
}
