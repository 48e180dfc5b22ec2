package main

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
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
