package procstat

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Pin restricts pid, every thread it has now, to cpus. Threads it starts
// later inherit the mask of the thread that starts them, so a Go process
// pinned once stays pinned; a process started again must be pinned again.
func Pin(pid int, cpus []int) error {
	if len(cpus) == 0 {
		return fmt.Errorf("pin %d: no CPUs", pid)
	}
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return fmt.Errorf("pin %d: %w", pid, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// A thread that ended since the listing has nothing to pin.
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("pin %d thread %d to CPUs %v: %w", pid, tid, cpus, err)
		}
	}
	return nil
}

// Allowed is the CPUs pid (a process's main thread, or a thread id) may run on.
func Allowed(pid int) ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return nil, fmt.Errorf("affinity of %d: %w", pid, err)
	}
	var out []int
	for c := range 1024 {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}
