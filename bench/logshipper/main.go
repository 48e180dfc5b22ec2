// Command logshipper measures the log shipper the way it runs in
// production, on one core: CRI files of 110 pods on a node, enriched from
// the node-scoped pod informer of a real kube-apiserver (labels, service,
// env of pods owned by ReplicaSets of Deployments), shipped to Kafka
// with zstd. The broker is franz-go's kfake in a process of its own, so
// its CPU is reported apart from the shipper's; kcat (librdkafka), an
// independent consumer, then checks every line arrived exactly once.
//
// In the same run and on the same files it measures rsyslog's imfile ->
// omfile (Debian's rsyslog) as a mature C peer and prints lines per
// core-second of each and their ratio. The shipper and rsyslog are
// measured in -rounds alternated rounds, each from a fresh state, and
// compared by their median runs and by the median of each round's ratio:
// the machine's speed drifts over minutes, and a round's two runs share
// it. -baseline adds the earlier figure
// (file sink, enrichment from the path only) side by side. The shipper
// and rsyslog are pinned to one CPU (taskset), the shipper with
// GOMAXPROCS=1; the broker to another.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	"github.com/trellis-dev/trellis/internal/controlplane"
)

type options struct {
	lines, pods, perService int
	cpu, brokerCPU          int
	sink, enrich, consumer  string
	baseline                bool
	cpuprofile              string
	level                   int
	batchLines, batchBytes  int
	rounds                  int
	poll                    time.Duration
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "ship" || os.Args[1] == "broker") {
		sub := shipMain
		if os.Args[1] == "broker" {
			sub = brokerMain
		}
		if err := sub(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.IntVar(&o.lines, "lines", 2_000_000, "lines to ship in total")
	flag.IntVar(&o.pods, "pods", 110, "pods on the node (one container, one log file each)")
	flag.IntVar(&o.perService, "per-service", 10, "pods per Deployment (and Kafka topic)")
	flag.IntVar(&o.cpu, "cpu", 1, "the CPU the shipper and rsyslog run on")
	flag.IntVar(&o.brokerCPU, "broker-cpu", -1, "the CPU the broker runs on (default: another than -cpu)")
	flag.StringVar(&o.sink, "sink", "kafka", "the shipper's sink: kafka (kfake, zstd) or file")
	flag.StringVar(&o.enrich, "enrich", "informer", "enrichment: informer (pod informer on a real apiserver) or path (the log's path only)")
	flag.StringVar(&o.consumer, "consumer", "kcat", "the independent consumer checking Kafka: kcat, or franz (franz-go, in the bench process)")
	flag.BoolVar(&o.baseline, "baseline", true, "also measure the earlier figure (file sink, path only) on the same files")
	// The shipper rescans every container's dir each poll, and also
	// while it waits for the sink: the interval is a cost per pod, so it
	// is the daemon's default here (the earlier figure used 50ms).
	flag.DurationVar(&o.poll, "poll", 200*time.Millisecond, "the shipper's poll interval (trellis-log-shipper -poll)")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write the shipper's CPU profile (its first run) to this file")
	flag.IntVar(&o.rounds, "rounds", 5, "alternated rounds of the shipper and rsyslog, each from a fresh state; compared by median runs and median ratio")
	flag.IntVar(&o.batchBytes, "batch-bytes", 0, "the shipper's bytes per batch (trellis-log-shipper -batch-bytes; 0: its default)")
	flag.IntVar(&o.batchLines, "batch-lines", 0, "the shipper's lines per batch (trellis-log-shipper -batch-lines; 0: its default)")
	flag.IntVar(&o.level, "compression-level", 0, "the shipper's zstd level (trellis-log-shipper -compression-level; 0: its default)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// config is one shipper leg's sink and enrichment.
type config struct{ sink, enrich string }

func (c config) String() string {
	what := map[config]string{
		{"kafka", "informer"}: "production: informer enrichment, Kafka zstd",
		{"file", "path"}:      "earlier figure: path only, file sink",
	}[c]
	if what == "" {
		what = c.enrich + " enrichment, " + c.sink + " sink"
	}
	return "trellis-log-shipper (" + what + ")"
}

func run(o options) error {
	prod := config{o.sink, o.enrich}
	if (prod.sink != "kafka" && prod.sink != "file") || (prod.enrich != "informer" && prod.enrich != "path") {
		return fmt.Errorf("-sink must be kafka or file and -enrich informer or path, not %q and %q", o.sink, o.enrich)
	}
	legs := []config{prod}
	if o.baseline && prod != (config{"file", "path"}) {
		legs = append(legs, config{"file", "path"})
	}
	if err := checkDeps(o, prod.sink == "kafka"); err != nil {
		return err
	}
	if o.brokerCPU < 0 {
		o.brokerCPU = 0
		if o.cpu == 0 {
			o.brokerCPU = 1
		}
	}
	dir, err := os.MkdirTemp("", "trellis-logbench-")
	if err != nil {
		return fmt.Errorf("make the bench's directory: %w", err)
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the bench binary: %w", err)
	}
	root := filepath.Join(dir, "pods")

	logs := pathOnlyLogs(o.pods, o.perService)
	var cp *controlplane.ControlPlane
	if prod.enrich == "informer" {
		if cp, err = controlplane.Start(filepath.Join(dir, "cp"), controlplane.Options{}); err != nil {
			return fmt.Errorf("start the control plane: %w", err)
		}
		defer cp.Stop()
		if logs, err = createPods(context.Background(), cp.Client, o.pods, o.perService); err != nil {
			return err
		}
		fmt.Printf("control plane: etcd + kube-apiserver %s; %d pods bound to %s, %d per Deployment/ReplicaSet, 7 labels each\n",
			controlplane.KubernetesVersion, o.pods, benchNode, o.perService)
	}
	in, err := writeLogs(root, logs, o.lines/o.pods)
	if err != nil {
		return err
	}
	fmt.Printf("input: %d files (one per pod's container, kubelet's layout), %d lines, %.1f MB (CRI format)\n", len(in.logs), in.lines(), float64(in.bytes)/1e6)
	fmt.Printf("pinned: shipper and rsyslog on CPU %d (shipper GOMAXPROCS=1), broker on CPU %d; the machine has %d CPUs; shipper poll %s\n\n", o.cpu, o.brokerCPU, runtime.NumCPU(), o.poll)

	ship, rs, err := rounds(o, prod, cp, self, dir, root, in)
	if err != nil {
		return err
	}
	results := []result{ship}
	for _, c := range legs[1:] {
		d := filepath.Join(dir, "baseline")
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("make the baseline's run dir: %w", err)
		}
		r, err := shipLeg(o, c, cp, self, d, root, in, "")
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	printResults(results, rs, in)
	return nil
}

// rounds measures the shipper with c and rsyslog o.rounds times each,
// alternated, every run from a fresh state on the same files, and returns
// the median run of each. It prints each round and the median of the
// rounds' ratios: the machine's speed drifts over minutes (both programs'
// CPU per line moved by 15-25% between runs a minute apart), and a round's
// two runs share its speed.
func rounds(o options, c config, cp *controlplane.ControlPlane, self, dir, root string, in input) (ship, rs result, err error) {
	var ships, rss []result
	var ratios []float64
	for i := range max(o.rounds, 1) {
		d := filepath.Join(dir, fmt.Sprintf("round-%d", i+1))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return ship, rs, fmt.Errorf("make round %d's dir: %w", i+1, err)
		}
		profile := ""
		if i == 0 {
			profile = o.cpuprofile
		}
		s, err := shipLeg(o, c, cp, self, d, root, in, profile)
		if err != nil {
			return ship, rs, err
		}
		r, err := rsyslogLeg(o, d, root, in)
		if err != nil {
			return ship, rs, err
		}
		ratio := s.perCoreSecond() / r.perCoreSecond()
		fmt.Printf("  round %d: shipper %.2fµs (peak RSS %.1f MiB), rsyslog %.2fµs CPU per line (%d voluntary and %d involuntary context switches): ratio %.2f\n",
			i+1, 1e6*s.cpu.Seconds()/float64(s.lines), float64(s.peakKiB)/1024, 1e6*r.cpu.Seconds()/float64(r.lines), r.voluntary, r.involuntary, ratio)
		ships, rss, ratios = append(ships, s), append(rss, r), append(ratios, ratio)
	}
	ship, rs = median(ships), median(rss)
	if len(ratios) > 1 {
		sort.Float64s(ratios)
		fmt.Printf("  median of the %d rounds' ratios: %.2f (goal ≥ 1.5; lowest %.2f, highest %.2f)\n", len(ratios), ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])
		// A run's peak depends on what is live when a collection ends
		// while the backlog ramps up; the median run's alone (in the
		// table) moves by 30 MiB from run to run.
		peaks := make([]int, len(ships))
		for i, s := range ships {
			peaks[i] = s.peakKiB
		}
		sort.Ints(peaks)
		fmt.Printf("  the shipper's peak RSS over the %d rounds: median %.1f MiB (lowest %.1f, highest %.1f)\n", len(peaks), float64(peaks[len(peaks)/2])/1024, float64(peaks[0])/1024, float64(peaks[len(peaks)-1])/1024)
	}
	return ship, rs, nil
}

// median is the run with the median CPU, named as such.
func median(runs []result) result {
	if len(runs) == 1 {
		return runs[0]
	}
	runs = append([]result(nil), runs...)
	sort.Slice(runs, func(i, j int) bool { return runs[i].cpu < runs[j].cpu })
	m := runs[len(runs)/2]
	m.name = fmt.Sprintf("%s, median of %d runs", m.name, len(runs))
	return m
}

// checkDeps fails at once, naming the Debian package and the command that
// installs it, when rsyslog or kcat is missing.
func checkDeps(o options, kafka bool) error {
	var missing []string
	if _, err := exec.LookPath("rsyslogd"); err != nil {
		if _, err := os.Stat("/usr/sbin/rsyslogd"); err != nil {
			missing = append(missing, "rsyslog")
		}
	}
	if kafka && o.consumer == "kcat" {
		if _, err := exec.LookPath("kcat"); err != nil {
			if _, err := exec.LookPath("kafkacat"); err != nil {
				missing = append(missing, "kafkacat")
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing Debian packages %v (rsyslog: the C peer; kafkacat: kcat, the independent Kafka consumer): apt-get update && apt-get install -y kafkacat rsyslog (or -consumer franz to check with franz-go)", missing)
	}
	return nil
}
