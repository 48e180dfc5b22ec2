// Command logshipper measures the log shipper on one core: files to a sink,
// in MB/s and lines/s, peak memory and CPU per GB. In the same run and on
// the same files it measures rsyslog's imfile -> omfile (Debian's rsyslog)
// as a mature C peer, and prints the ratio. Both are pinned to one CPU
// (taskset) and the shipper runs with GOMAXPROCS=1.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trellis-dev/trellis/daemons/logshipper"
	"github.com/trellis-dev/trellis/daemons/logshipper/sink"
	"github.com/trellis-dev/trellis/internal/procstat"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "ship" {
		ship(os.Args[2], os.Args[3], os.Args[4])
		return
	}
	lines := flag.Int("lines", 2_000_000, "lines to ship in total")
	files := flag.Int("files", 8, "containers (one file each)")
	cpu := flag.Int("cpu", 1, "the CPU both run on")
	flag.Parse()
	if err := run(*lines, *files, *cpu); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// ship is the shipper under test: files under root to a file sink.
func ship(root, checkpoint, out string) {
	f, err := sink.File(out)
	if err != nil {
		panic(err)
	}
	s, err := logshipper.New(logshipper.Config{Root: root, Checkpoint: checkpoint, Sink: f, Node: "bench-node", Poll: 50 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	_ = s.Run(ctx)
	f.Close()
}

type result struct {
	name    string
	wall    time.Duration
	cpu     time.Duration
	peakKiB int
}

func run(nLines, nFiles, cpu int) error {
	dir, err := os.MkdirTemp("", "trellis-logbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "pods")
	var total int64
	rng := rand.New(rand.NewPCG(1, 2))
	ts := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	for i := range nFiles {
		d := filepath.Join(root, fmt.Sprintf("shop_web-%d_%08d-0000-0000-0000-000000000000", i, i), "app")
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		var b bytes.Buffer
		for j := range nLines / nFiles {
			ts = ts.Add(time.Microsecond)
			fmt.Fprintf(&b, "%s stdout F GET /api/v1/items/%d 200 %dms user=%d %s\n", ts.Format(time.RFC3339Nano), j, rng.IntN(500), rng.IntN(1e6), strings.Repeat("x", rng.IntN(120)))
		}
		total += int64(b.Len())
		if err := os.WriteFile(filepath.Join(d, "0.log"), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	want := nLines / nFiles * nFiles
	fmt.Printf("input: %d files, %d lines, %.1f MB (CRI format)\n", nFiles, want, float64(total)/1e6)

	self, err := os.Executable()
	if err != nil {
		return err
	}
	ours := filepath.Join(dir, "trellis.out")
	cmd := exec.Command("taskset", "-c", strconv.Itoa(cpu), self, "ship", root, filepath.Join(dir, "cp.json"), ours)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	r1, err := measure("trellis-log-shipper (parse, reassemble, enrich, JSON, checkpoint)", cmd, ours, want)
	if err != nil {
		return err
	}

	theirs := filepath.Join(dir, "rsyslog.out")
	work := filepath.Join(dir, "rsyslog-work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	conf := fmt.Sprintf(`global(workDirectory=%q)
module(load="imfile" mode="inotify")
input(type="imfile" File="%s/*/*/0.log" Tag="k8s" freshStartTail="off" reopenOnTruncate="on")
template(name="raw" type="string" string="%%msg%%\n")
action(type="omfile" file=%q template="raw")
`, work, root, theirs)
	confPath := filepath.Join(dir, "rsyslog.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return err
	}
	cmd = exec.Command("taskset", "-c", strconv.Itoa(cpu), "rsyslogd", "-n", "-f", confPath, "-i", filepath.Join(dir, "rsyslog.pid"))
	r2, err := measure("rsyslog imfile -> omfile (read lines, write them)", cmd, theirs, want)
	if err != nil {
		return err
	}
	for _, r := range []result{r1, r2} {
		mbs := float64(total) / 1e6 / r.wall.Seconds()
		fmt.Printf("%-70s wall %6.2f s  %7.1f MB/s  %9.0f lines/s  cpu %6.2f s (%5.1f s/GB)  peak RSS %6.1f MiB\n",
			r.name, r.wall.Seconds(), mbs, float64(want)/r.wall.Seconds(), r.cpu.Seconds(), r.cpu.Seconds()/(float64(total)/1e9), float64(r.peakKiB)/1024)
	}
	fmt.Printf("ratio trellis/rsyslog, throughput on one core: %.2f (CPU per line: %.2f)\n",
		r2.wall.Seconds()/r1.wall.Seconds(), r1.cpu.Seconds()/r2.cpu.Seconds())
	return nil
}

// measure runs cmd until out holds want lines and returns its wall time
// (from start to the last line), CPU time and peak RSS.
func measure(name string, cmd *exec.Cmd, out string, want int) (result, error) {
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, fmt.Errorf("%s: %w", name, err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	// The process is taskset; its child (exec'd in place) has the same PID.
	pid := cmd.Process.Pid
	var lines int
	var off int64
	peak := 0
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(10 * time.Minute)
	for lines < want {
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("%s: %d of %d lines after 10 minutes", name, lines, want)
		}
		if f, err := os.Open(out); err == nil {
			for {
				n, err := f.ReadAt(buf, off)
				lines += bytes.Count(buf[:n], []byte{'\n'})
				off += int64(n)
				if n == 0 || err != nil {
					break
				}
			}
			f.Close()
		}
		if kb := vmHWM(pid); kb > peak {
			peak = kb
		}
		if lines < want {
			time.Sleep(20 * time.Millisecond)
		}
	}
	wall := time.Since(start)
	return result{name: name, wall: wall, cpu: cpuTime(pid), peakKiB: max(peak, vmHWM(pid))}, nil
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
