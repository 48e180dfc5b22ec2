package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"time"

	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/procstat"
)

func sampleCPU(cp *controlplane.ControlPlane) procstat.CPUSample {
	pids := cp.PIDs()
	pids["bench (loader, watcher, trellis-controller)"] = os.Getpid()
	return procstat.SampleCPU(pids)
}

// printCPU prints the CPU each process used between two samples.
func printCPU(title string, from, to procstat.CPUSample, wall time.Duration) {
	procstat.PrintCPU(os.Stdout, title, from, to, wall, 0)
}

// startCPUProfile profiles this process into path until the returned stop
// (or pprof.StopCPUProfile) is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create the CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("start the CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
