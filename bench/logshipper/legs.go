package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/trellis-dev/trellis/internal/controlplane"
)

// shipLeg measures the shipper with c's sink and enrichment on the input,
// from a fresh checkpoint, until the sink acknowledged every byte, then
// checks what the sink holds.
func shipLeg(o options, c config, cp *controlplane.ControlPlane, self, dir, root string, in input, profile string) (result, error) {
	tag := c.sink + "-" + c.enrich
	checkpoint := filepath.Join(dir, tag+".checkpoint.json")
	out := filepath.Join(dir, tag+".out")
	args := []string{"-c", strconv.Itoa(o.cpu), self, "ship", "-root", root, "-checkpoint", checkpoint, "-sink", c.sink, "-file", out, "-poll", o.poll.String(), "-batch-lines", strconv.Itoa(o.batchLines), "-batch-bytes", strconv.Itoa(o.batchBytes)}
	side := map[string]int{}
	if c.enrich == "informer" {
		args = append(args, "-kubeconfig", cp.Kubeconfig)
		for n, pid := range cp.PIDs() {
			side[n+", during the leg"] = pid
		}
	}
	var b *broker
	if c.sink == "kafka" {
		var err error
		if b, err = startBroker(self, o.brokerCPU); err != nil {
			return result{}, err
		}
		defer b.stop()
		args = append(args, "-brokers", b.addr, "-compression-level", strconv.Itoa(o.level), "-batch-stats", filepath.Join(dir, tag+".batches"))
		side["broker (kfake: keeps batches compressed), during the leg"] = b.pid()
	}
	if profile != "" {
		args = append(args, "-cpuprofile", profile)
	}
	cmd := dieWithBench(exec.Command("taskset", args...))
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	fmt.Printf("== %s\n", c)
	r, stop, err := measure(leg{name: c.String(), cmd: cmd, ready: true, done: acked(checkpoint, in.bytes), side: side}, in.lines())
	if err != nil {
		return r, err
	}
	// Stopped before the check, so that its profile is of shipping only
	// and the consumer does not share its CPU.
	stop()
	fmt.Printf("  all %d lines acknowledged by the %s sink after %.2fs\n", in.lines(), c.sink, r.wall.Seconds())
	chk := newChecker(in)
	enriched := c.enrich == "informer"
	if c.sink == "file" {
		if err := checkFile(out, chk); err != nil {
			return r, err
		}
		return r, chk.report("file sink's output", enriched)
	}
	topics := []string{"logs.unowned"}
	if enriched {
		topics = topics[:0]
		for i := range (o.pods + o.perService - 1) / o.perService {
			topics = append(topics, "logs."+serviceName(i))
		}
	}
	var cpu time.Duration
	who := "kcat (librdkafka), separate processes"
	if o.consumer == "kcat" {
		probe, perr := kcatProbe(b.addr)
		if perr == nil {
			fmt.Printf("  %s\n", probe)
			cpu, err = consumeKcat(b.addr, topics, chk)
		}
		if err = errors.Join(perr, err); err != nil {
			fmt.Printf("  kcat could not check the broker, falling back to franz-go: %v\n", err)
			chk = newChecker(in)
			o.consumer = "franz"
		}
	}
	if o.consumer == "franz" {
		who = "franz-go consumer, in the bench process"
		if cpu, err = consumeFranz(b.addr, topics, in.lines(), chk); err != nil {
			return r, err
		}
	}
	r.side["consumer "+who+", after the leg"] = cpu
	if err := printBatchSizes(filepath.Join(dir, tag+".batches"), o.level); err != nil {
		return r, err
	}
	return r, chk.report(who+", "+strconv.Itoa(len(topics))+" topics", enriched)
}

// rsyslogLeg measures rsyslog's imfile -> omfile on the same files.
func rsyslogLeg(o options, dir, root string, in input) (result, error) {
	out := filepath.Join(dir, "rsyslog.out")
	work := filepath.Join(dir, "rsyslog-work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return result{}, fmt.Errorf("make rsyslog's work dir: %w", err)
	}
	conf := fmt.Sprintf(`global(workDirectory=%q)
module(load="imfile" mode="inotify")
input(type="imfile" File="%s/*/*/0.log" Tag="k8s" freshStartTail="off" reopenOnTruncate="on")
template(name="raw" type="string" string="%%msg%%\n")
action(type="omfile" file=%q template="raw")
`, work, root, out)
	confPath := filepath.Join(dir, "rsyslog.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return result{}, fmt.Errorf("write rsyslog's config: %w", err)
	}
	rsyslogd := "rsyslogd"
	if _, err := exec.LookPath(rsyslogd); err != nil {
		rsyslogd = "/usr/sbin/rsyslogd"
	}
	cmd := dieWithBench(exec.Command("taskset", "-c", strconv.Itoa(o.cpu), rsyslogd, "-n", "-f", confPath, "-i", filepath.Join(dir, "rsyslog.pid")))
	fmt.Printf("== rsyslog imfile -> omfile\n")
	r, stop, err := measure(leg{name: "rsyslog imfile -> omfile (read lines, write them)", cmd: cmd, done: lineCount(out, in.lines())}, in.lines())
	if err != nil {
		return r, err
	}
	stop()
	fmt.Printf("  all %d lines in rsyslog's output after %.2fs\n", in.lines(), r.wall.Seconds())
	return r, nil
}

// printBatchSizes prints what the shipper's Kafka batches weighed before
// and after compression: the other side of a compression level's CPU.
func printBatchSizes(path string, level int) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the shipper's batch sizes: %w", err)
	}
	var batches, records, raw, compressed int64
	if _, err := fmt.Sscan(string(b), &batches, &records, &raw, &compressed); err != nil {
		return fmt.Errorf("parse the shipper's batch sizes %q: %w", b, err)
	}
	name := "the shipper's default level"
	if level != 0 {
		name = "level " + strconv.Itoa(level)
	}
	fmt.Printf("  Kafka batches, zstd at %s: %d records, %.1f MB before compression, %.1f MB after (%.2f%%, %.1f bytes per record)\n",
		name, records, float64(raw)/1e6, float64(compressed)/1e6, 100*float64(compressed)/float64(max(raw, 1)), float64(compressed)/float64(max(records, 1)))
	fmt.Printf("  %d Kafka batches: %.0f records and %.1f KiB before compression each, on average\n",
		batches, float64(records)/float64(max(batches, 1)), float64(raw)/1024/float64(max(batches, 1)))
	return nil
}

// dieWithBench has cmd killed if the bench dies before it (Pdeathsig
// holds across taskset's exec): a bench that panicked once left two
// shippers polling on the measured core for two hours.
func dieWithBench(cmd *exec.Cmd) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}
