package main

import (
	"os"
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
