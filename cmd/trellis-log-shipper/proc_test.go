package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// shipperProc starts this test binary as the shipper (see TestMain) with
// args, so a test can SIGSTOP and SIGKILL a real process, and keeps its
// output to show when the test fails.
type shipperProc struct {
	t    *testing.T
	args string
	mu   sync.Mutex
	logs strings.Builder
}

func newShipperProc(t *testing.T, args string) *shipperProc {
	p := &shipperProc{t: t, args: args}
	t.Cleanup(func() {
		if t.Failed() {
			out := p.output()
			if len(out) > 4000 {
				out = out[len(out)-4000:]
			}
			t.Logf("shipper output (tail):\n%s", out)
		}
	})
	return p
}

func (p *shipperProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// start runs one shipper; the caller kills it.
func (p *shipperProc) start() *exec.Cmd {
	p.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TRELLIS_LOG_SHIPPER_MAIN=1", "TRELLIS_LOG_SHIPPER_ARGS="+p.args)
	pr, pw, err := os.Pipe()
	if err != nil {
		p.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	pw.Close()
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := pr.Read(b)
			p.mu.Lock()
			p.logs.Write(b[:n])
			p.mu.Unlock()
			if err != nil {
				pr.Close()
				return
			}
		}
	}()
	return cmd
}

// kill sends SIGKILL (a stopped process dies too) and reaps the process.
func kill(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// stop sends SIGSTOP and returns once every thread of the process is
// stopped. kill(2) only queues the signal: a thread running on another
// CPU stops when it next enters the kernel, so until then the process can
// still read (and ship) what the test writes next.
func stop(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP the shipper: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		running, err := runningThreads(cmd.Process.Pid)
		if err != nil {
			t.Fatalf("read the shipper's threads: %v", err)
		}
		if len(running) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shipper's threads %v were still running 10 s after SIGSTOP", running)
		}
		time.Sleep(time.Millisecond)
	}
}

// runningThreads lists the threads of pid that are not in the stopped
// state, from /proc/<pid>/task/<tid>/stat.
func runningThreads(pid int) ([]string, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return nil, fmt.Errorf("no threads listed for pid %d: %v", pid, err)
	}
	var running []string
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		// "tid (comm) S ...": comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			return nil, fmt.Errorf("%s: no state in %q", f, s)
		}
		if state := s[i+2]; state != 'T' && state != 't' {
			running = append(running, fmt.Sprintf("%s=%c", filepath.Base(filepath.Dir(f)), state))
		}
	}
	return running, nil
}
