package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/trellis-dev/trellis/internal/procstat"
)

// planeCPUs splits the CPUs the bench may use (its own affinity: a
// container's cpuset need not start at 0): the first half (at least one)
// for the fleet's control plane, the rest for the members and the
// standalone cluster. It refuses fewer than 2.
func planeCPUs() (fleetCPUs, memberCPUs []int, err error) {
	cpus, err := procstat.Allowed(os.Getpid())
	if err != nil {
		return nil, nil, err
	}
	if len(cpus) < 2 {
		return nil, nil, fmt.Errorf("-pin needs 2 CPUs or more, the bench may use %v", cpus)
	}
	half := len(cpus) / 2
	return cpus[:half], cpus[half:], nil
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
