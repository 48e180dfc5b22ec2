package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/trellis-dev/trellis/internal/procstat"
)

// cpuSplit is the CPUs of the fleet's control plane and of the clusters
// (none: nothing pinned).
type cpuSplit struct{ fleet, members []int }

// planeCPUs splits the CPUs the bench may use (its own affinity: a
// container's cpuset need not start at 0): the first half (at least one)
// for the fleet's control plane, the rest for the members and the
// standalone cluster. It refuses fewer than 2.
func planeCPUs() (cpuSplit, error) {
	cpus, err := procstat.Allowed(os.Getpid())
	if err != nil {
		return cpuSplit{}, err
	}
	if len(cpus) < 2 {
		return cpuSplit{}, fmt.Errorf("-pin needs 2 CPUs or more, the bench may use %v", cpus)
	}
	half := len(cpus) / 2
	return cpuSplit{fleet: cpus[:half], members: cpus[half:]}, nil
}

// pin puts the fleet's control plane on its CPUs and every cluster's
// processes (kwok and the trellis-controllers included) on the others:
// production's topology, where the fleet's control plane has machines of
// its own and takes nothing from the members'. The bench's own process
// (the client) runs anywhere. Called before each run: a process started
// again since the last one gets its CPUs then.
func (b *bench) pin() error {
	if len(b.cpus.fleet) == 0 {
		return nil
	}
	for name, pid := range b.pids() {
		cpus := b.cpus.members
		switch {
		case strings.HasPrefix(name, "bench "):
			continue
		case strings.HasPrefix(name, "karmada "):
			cpus = b.cpus.fleet
		}
		if err := procstat.Pin(pid, cpus); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}
