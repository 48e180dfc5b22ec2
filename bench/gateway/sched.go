package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// schedSample is, per process, the time its threads ran and the time they
// waited on a run queue, ready to run but without a CPU
// (/proc/<pid>/task/*/schedstat). On a loaded machine the wait is where a
// latency tail comes from that no profile of the process shows.
type schedSample map[string][2]time.Duration

func sampleSched(pids map[string]int) schedSample {
	s := schedSample{}
	for name, pid := range pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		var ran, waited time.Duration
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue // the thread exited
			}
			f := strings.Fields(string(b))
			if len(f) < 2 {
				continue
			}
			r, _ := strconv.ParseInt(f[0], 10, 64)
			w, _ := strconv.ParseInt(f[1], 10, 64)
			ran, waited = ran+time.Duration(r), waited+time.Duration(w)
		}
		s[name] = [2]time.Duration{ran, waited}
	}
	return s
}

// printSched prints, for the named processes, how long their threads
// waited for a CPU per second of CPU they got between two samples.
func printSched(from, to schedSample, names ...string) {
	for _, n := range names {
		ran, waited := to[n][0]-from[n][0], to[n][1]-from[n][1]
		if ran <= 0 {
			continue
		}
		fmt.Printf("  %-22s ran %5.1fs, waited for a CPU %5.1fs (%.2f s per CPU second)\n", n, ran.Seconds(), waited.Seconds(), waited.Seconds()/ran.Seconds())
	}
}
