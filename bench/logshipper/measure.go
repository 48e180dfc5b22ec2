package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/trellis-dev/trellis/internal/fsync"
	"github.com/trellis-dev/trellis/internal/procstat"
)

// result is one leg: the process under test, and beside it the broker
// and the control plane, each with its own CPU.
type result struct {
	name    string
	lines   int
	wall    time.Duration
	cpu     time.Duration
	peakKiB int
	// side: CPU used during the leg by the processes serving it (broker,
	// kube-apiserver, etcd), by name; sidePeakKiB their peak RSS.
	side        map[string]time.Duration
	sidePeakKiB map[string]int
	// voluntary and involuntary count the process's context switches (all threads)
	// from its start to the leg's end.
	voluntary, involuntary int
}

// leg is a process to measure until done says it finished the input.
type leg struct {
	name string
	cmd  *exec.Cmd
	// ready: the process prints "ready" on stdout when its timed part
	// starts (the shipper, once its informer synced).
	ready bool
	done  func() (bool, error)
	// side are the serving processes' pids by name.
	side map[string]int
}

// measure runs l until done, and leaves the process running: stop
// ends it (the broker must outlive it for the consumer's check, not it).
func measure(l leg, lines int) (r result, stop func(), err error) {
	r = result{name: l.name, lines: lines, side: map[string]time.Duration{}, sidePeakKiB: map[string]int{}}
	l.cmd.Stderr = os.Stderr
	var out *bufio.Reader
	if l.ready {
		p, err := l.cmd.StdoutPipe()
		if err != nil {
			return r, nil, fmt.Errorf("%s: stdout: %w", l.name, err)
		}
		out = bufio.NewReader(p)
	}
	if err := l.cmd.Start(); err != nil {
		return r, nil, fmt.Errorf("start %s: %w", l.name, err)
	}
	end := func() { _ = l.cmd.Process.Signal(syscall.SIGTERM); _ = l.cmd.Wait() }
	defer func() {
		if err != nil {
			end() // stop is nil on an error return
		}
	}()
	// The process is taskset; its child (exec'd in place) has the same PID.
	pid := l.cmd.Process.Pid
	if out != nil {
		line, err := out.ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			return r, nil, fmt.Errorf("%s did not start: %q %w", l.name, line, err)
		}
	}
	start := time.Now()
	cpu0 := cpuTime(pid)
	side0 := procstat.SampleCPU(l.side)
	peak := 0
	deadline := start.Add(10 * time.Minute)
	for {
		ok, err := l.done()
		if err != nil {
			return r, nil, fmt.Errorf("%s: %w", l.name, err)
		}
		if kb := vmHWM(pid); kb > peak {
			peak = kb
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return r, nil, fmt.Errorf("%s: not done after 10 minutes", l.name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.wall = time.Since(start)
	r.cpu = cpuTime(pid) - cpu0
	r.voluntary, r.involuntary = procstat.ContextSwitches(pid)
	r.peakKiB = max(peak, vmHWM(pid))
	side1 := procstat.SampleCPU(l.side)
	for n, p := range l.side {
		r.side[n] = side1[n] - side0[n]
		r.sidePeakKiB[n] = vmHWM(p)
	}
	return r, end, nil
}

// acked reports whether the shipper's checkpoint says the sink
// acknowledged every byte of the input: one generation per file, each
// at its end.
func acked(checkpoint string, total int64) func() (bool, error) {
	return func() (bool, error) {
		b, _, err := fsync.ReadRecord(checkpoint)
		if errors.Is(err, fsync.ErrCorrupt) {
			// Read while the shipper wrote into both slots in turn (two
			// saves within one read): a second read cannot race so again.
			b, _, err = fsync.ReadRecord(checkpoint)
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return false, nil // not written yet
		case err != nil:
			return false, fmt.Errorf("read the checkpoint %s: %w", checkpoint, err)
		}
		var c struct {
			Positions []struct {
				Offset int64 `json:"offset"`
			} `json:"positions"`
		}
		if err := json.Unmarshal(b, &c); err != nil {
			return false, fmt.Errorf("read the checkpoint %s: %w", checkpoint, err)
		}
		var sum int64
		for _, p := range c.Positions {
			sum += p.Offset
		}
		return sum >= total, nil
	}
}

// lineCount reports whether path holds want lines (rsyslog's output).
func lineCount(path string, want int) func() (bool, error) {
	var lines int
	var off int64
	buf := make([]byte, 1<<20)
	return func() (bool, error) {
		f, err := os.Open(path)
		if err != nil {
			return false, nil
		}
		defer f.Close()
		for {
			n, err := f.ReadAt(buf, off)
			lines += bytes.Count(buf[:n], []byte{'\n'})
			off += int64(n)
			if n == 0 || err != nil {
				break
			}
		}
		return lines >= want, nil
	}
}

// vmHWM is pid's peak resident memory in KiB, 0 if it has exited.
func vmHWM(pid int) int {
	n, _ := procstat.PeakRSS(pid)
	return n
}

// cpuTime is pid's CPU time, 0 if it has exited.
func cpuTime(pid int) time.Duration {
	d, _ := procstat.CPUTime(pid)
	return d
}
