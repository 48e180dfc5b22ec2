package main

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/trellis-dev/trellis/internal/procstat"
)

// planeCPUs splits the machine's CPUs: the first half (at least one) for
// the fleet's control plane, the rest for the members and the standalone
// cluster. It refuses a machine with one CPU.
func planeCPUs() (fleetCPUs, memberCPUs []int, err error) {
	n := runtime.NumCPU()
	if n < 2 {
		return nil, nil, fmt.Errorf("-pin needs 2 CPUs or more, this machine has %d", n)
	}
	for c := range n {
		if c < n/2 {
			fleetCPUs = append(fleetCPUs, c)
		} else {
			memberCPUs = append(memberCPUs, c)
		}
	}
	return fleetCPUs, memberCPUs, nil
}

// pin puts the fleet's control plane on its CPUs and every cluster's
// processes (kwok and the trellis-controllers included) on the others:
// production's topology, where the fleet's control plane has machines of
// its own and takes nothing from the members'. The bench's own process
// (the client) runs anywhere. Called before each run: a process started
// again since the last one gets its CPUs then.
func (b *bench) pin() error {
	if !b.pinned {
		return nil
	}
	fleetCPUs, memberCPUs, err := planeCPUs()
	if err != nil {
		return err
	}
	for name, pid := range b.pids() {
		cpus := memberCPUs
		switch {
		case strings.HasPrefix(name, "bench "):
			continue
		case strings.HasPrefix(name, "karmada "):
			cpus = fleetCPUs
		}
		if err := procstat.Pin(pid, cpus); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}
