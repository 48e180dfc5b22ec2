// Package procstat reads what the benchmarks report of a process from
// Linux's /proc: CPU time used, peak resident memory and context switches.
package procstat

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const userHZ = 100

// CPUTime is the user and system time pid and its threads have used.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read the CPU time: %w", err)
	}
	s := string(b)
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat utime: %w", pid, err)
	}
	st, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat stime: %w", pid, err)
	}
	return time.Duration(ut+st) * time.Second / userHZ, nil
}

// PeakRSS is pid's peak resident memory (VmHWM) in KiB.
func PeakRSS(pid int) (int, error) { return statusKiB(pid, "VmHWM") }

// RSS is pid's resident memory now (VmRSS) in KiB.
func RSS(pid int) (int, error) { return statusKiB(pid, "VmRSS") }

// statusKiB reads a field of pid's /proc status file given in KiB.
func statusKiB(pid int, field string) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", field, err)
	}
	if n, ok := statusField(b, field); ok {
		return n, nil
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// ContextSwitches sums the voluntary and involuntary context switches of
// pid's threads since each started (0, 0 if it has exited).
func ContextSwitches(pid int) (voluntary, involuntary int) {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that just exited
		}
		v, _ := statusField(b, "voluntary_ctxt_switches")
		n, _ := statusField(b, "nonvoluntary_ctxt_switches")
		voluntary, involuntary = voluntary+v, involuntary+n
	}
	return voluntary, involuntary
}

// statusField is the number that starts the value of a /proc status
// file's field name.
func statusField(status []byte, name string) (int, bool) {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				return 0, false
			}
			n, err := strconv.Atoi(f[0])
			return n, err == nil
		}
	}
	return 0, false
}

// CPUSample is the CPU time each named process has used so far.
type CPUSample map[string]time.Duration

// SampleCPU reads each process's CPU time; one that has exited counts 0.
func SampleCPU(pids map[string]int) CPUSample {
	s := CPUSample{}
	for name, pid := range pids {
		s[name], _ = CPUTime(pid)
	}
	return s
}

// PrintCPU writes the CPU each process used between two samples, largest
// first, as a share of the wall time (on 2 cores the sum cannot pass 200%).
// Processes below floor are summed into one line.
func PrintCPU(w io.Writer, title string, from, to CPUSample, wall, floor time.Duration) {
	names := make([]string, 0, len(to))
	for n := range to {
		names = append(names, n)
	}
	used := func(n string) time.Duration { return to[n] - from[n] }
	sort.Slice(names, func(i, j int) bool {
		if used(names[i]) != used(names[j]) {
			return used(names[i]) > used(names[j])
		}
		return names[i] < names[j]
	})
	line := func(n string, d time.Duration) {
		fmt.Fprintf(w, "  %-45s %6.1fs  %4.0f%%\n", n, d.Seconds(), 100*d.Seconds()/wall.Seconds())
	}
	fmt.Fprintf(w, "%s CPU over %.1fs wall:\n", title, wall.Seconds())
	var total, rest time.Duration
	others := 0
	for _, n := range names {
		d := used(n)
		total += d
		if d < floor {
			rest += d
			others++
			continue
		}
		line(n, d)
	}
	if others > 0 {
		line(fmt.Sprintf("%d others", others), rest)
	}
	line("all", total)
}
