package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMain lets the test binary run as the shipper, so the fault test can
// kill -9 a real process.
func TestMain(m *testing.M) {
	if os.Getenv("TRELLIS_LOG_SPIN") == "1" {
		spin() // until killed
	}
	if os.Getenv("TRELLIS_LOG_SHIPPER_MAIN") == "1" {
		os.Args = append([]string{os.Args[0]}, strings.Fields(os.Getenv("TRELLIS_LOG_SHIPPER_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// kafka is franz-go's kfake: an in-process cluster speaking the real Kafka
// protocol (no broker can be installed here), persisted in a data dir so
// it can go down and come back with its data.
type kafka struct {
	t    *testing.T
	port int
	dir  string
	mu   sync.Mutex
	c    *kfake.Cluster
}

func (k *kafka) start() {
	k.t.Helper()
	var c *kfake.Cluster
	var err error
	for range 50 { // the port may linger briefly after a stop
		c, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(k.port), kfake.DataDir(k.dir), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(3))
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		k.t.Fatal(err)
	}
	k.mu.Lock()
	k.c = c
	k.mu.Unlock()
}

func (k *kafka) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c != nil {
		k.c.Close()
		k.c = nil
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writer plays the container runtime and the kubelet: it appends CRI lines
// (some split into partial chunks) to three containers' logs and rotates
// them, by rename (the kubelet's way) and by copytruncate.
type writer struct {
	root    string
	dirs    []string
	rng     *rand.Rand
	mu      sync.Mutex
	written map[string]bool
	n       atomic.Int64
	// rotateEvery: both rotating containers rotate this often.
	rotateEvery time.Duration
}

func (w *writer) line(i int, seq int64) {
	msg := fmt.Sprintf("c%d seq %d %s", i, seq, strings.Repeat("x", w.rng.IntN(80)))
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	var out string
	if seq%7 == 0 && len(msg) > 20 { // a partial line: two P chunks and an F
		out = fmt.Sprintf("%s stdout P %s\n%s stdout P %s\n%s stdout F %s\n", ts, msg[:5], ts, msg[5:12], ts, msg[12:])
	} else {
		out = fmt.Sprintf("%s stdout F %s\n", ts, msg)
	}
	f, err := os.OpenFile(filepath.Join(w.dirs[i], "0.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		panic(err)
	}
	_, _ = f.WriteString(out)
	f.Close()
	w.mu.Lock()
	w.written[msg] = true
	w.mu.Unlock()
}

func (w *writer) run(ctx context.Context) {
	var seq int64
	lastRotate := time.Now()
	rotations := 0
	for ctx.Err() == nil {
		for i := range w.dirs {
			w.line(i, seq)
		}
		seq++
		w.n.Add(int64(len(w.dirs)))
		if time.Since(lastRotate) > w.rotateEvery {
			rotations++
			// Container 0: rename; container 1: copytruncate.
			p0 := filepath.Join(w.dirs[0], "0.log")
			_ = os.Rename(p0, fmt.Sprintf("%s.%d", p0, rotations))
			p1 := filepath.Join(w.dirs[1], "0.log")
			if b, err := os.ReadFile(p1); err == nil {
				_ = os.WriteFile(fmt.Sprintf("%s.%d", p1, rotations), b, 0o644)
				_ = os.Truncate(p1, 0)
			}
			lastRotate = time.Now()
		}
		time.Sleep(time.Millisecond)
	}
}

// spin keeps every core busy, forever: run in a process of its own
// (TRELLIS_LOG_SPIN=1) beside the fault test, it loads the machine the way
// other programs do (issue 43 lost a whole rotated generation only on a
// loaded machine), without starving the test's own writer goroutine.
func spin() {
	for range runtime.NumCPU() {
		go func() {
			x := uint64(1)
			for {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}()
	}
	select {}
}

// startSpinner starts the spinner process; the returned func kills it.
func startSpinner(t *testing.T) func() {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TRELLIS_LOG_SPIN=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() { kill(cmd) }
}

// TestIntegrationKillAndKafkaOutage kills the real shipper with SIGKILL
// at random points, with a Kafka outage before every third kill, while
// three containers write and two of them rotate (rename, copytruncate),
// with a CPU spinner per core beside it the whole time, for three seeds:
// nothing may be lost, and no more than a batch duplicated per restart.
// Faults go on for 100 s in all, spread over the seeds (about 2 minutes
// with each seed's drain; TRELLIS_LOG_FAULT_FOR changes it);
// TRELLIS_LOG_FAULT_SEED replays one seed.
func TestIntegrationKillAndKafkaOutage(t *testing.T) {
	run := 100 * time.Second
	if d, err := time.ParseDuration(os.Getenv("TRELLIS_LOG_FAULT_FOR")); err == nil {
		run = d
	}
	seeds := []uint64{uint64(time.Now().UnixNano()), 0, 0}
	seeds[1], seeds[2] = seeds[0]+1, seeds[0]+2
	if v := os.Getenv("TRELLIS_LOG_FAULT_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("TRELLIS_LOG_FAULT_SEED=%q: %v", v, err)
		}
		seeds = []uint64{seed}
	}
	defer startSpinner(t)()
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			t.Logf("seed %d (replay: TRELLIS_LOG_FAULT_SEED=%d), a CPU spinner per core (%d)", seed, seed, runtime.NumCPU())
			killAndOutage(t, seed, run/time.Duration(len(seeds)))
		})
	}
}

// waitFile waits for path to exist.
func waitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	for end := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s not written within %s", path, timeout)
		}
	}
}

// envDuration reads a duration from the environment (def when unset), so a
// loss seen once can be chased with faster rotations and kills.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

func killAndOutage(t *testing.T, seed uint64, run time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 43))
	k := &kafka{t: t, port: freePort(t), dir: t.TempDir()}
	k.start()
	t.Cleanup(k.stop)
	root := t.TempDir()
	w := &writer{root: root, written: map[string]bool{}, rng: rand.New(rand.NewPCG(seed, 7)), rotateEvery: envDuration(t, "TRELLIS_LOG_FAULT_ROTATE", 1500*time.Millisecond)}
	upTo := envDuration(t, "TRELLIS_LOG_FAULT_UP", 2800*time.Millisecond) // a run's longest life
	for i, pod := range []string{"shop_web-1_u1", "shop_web-2_u2", "ml_train-0_u3"} {
		d := filepath.Join(root, pod, fmt.Sprintf("ctr%d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		w.dirs = append(w.dirs, d)
	}
	state := t.TempDir()
	const batchLines = 500
	p := newShipperProc(t, fmt.Sprintf("--root=%s --checkpoint=%s --sink=kafka --brokers=127.0.0.1:%d --kubeconfig=none --listen=127.0.0.1:0 --batch-lines=%d --poll=50ms --node-name=node-a",
		root, filepath.Join(state, "checkpoint.json"), k.port, batchLines))

	// The node's shipper comes before the pods: the writer starts once the
	// first run has written its checkpoint. A first run records rotated
	// files it finds as older than itself, not shipped (by design), so a
	// writer that rotated before that first look, on a loaded machine,
	// would lose its first generation to the test, not to the shipper.
	cmd := p.start()
	waitFile(t, filepath.Join(state, "checkpoint.json"), 30*time.Second)
	ctx, stopWriter := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.run(ctx) })

	// kill -9 at random points; before every third kill Kafka goes away
	// for 4 s, so the reader stops behind while files rotate under it.
	kills := 0
	deadline := time.Now().Add(run)
	outages := 0
	for time.Now().Before(deadline) {
		if kills > 0 {
			cmd = p.start()
		}
		time.Sleep(time.Duration(300+rng.Int64N(int64(upTo-300*time.Millisecond)/1e6)) * time.Millisecond)
		if kills%3 == 1 {
			outages++
			k.stop()
			time.Sleep(4 * time.Second)
			k.start()
		}
		kill(cmd)
		kills++
	}
	stopWriter()
	wg.Wait()
	total := int(w.n.Load())

	// A last run ships the rest; then read everything back.
	final := p.start()
	t.Cleanup(func() { kill(final) })
	counts := map[string]int{}
	var records, gaps int
	var invented []string // records of lines never written (the first few)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", k.port)), kgo.ConsumeTopics("logs.unowned"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	end := time.Now().Add(60 * time.Second)
	for time.Now().Before(end) && len(counts) < total {
		pctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := consumer.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			var rec struct {
				Log, Namespace, Pod, Container, Node string
				Gap                                  *json.RawMessage
			}
			if err := json.Unmarshal(r.Value, &rec); err != nil {
				t.Fatalf("record %q: %v", r.Value, err)
			}
			if rec.Namespace == "" || rec.Pod == "" || rec.Node != "node-a" {
				t.Fatalf("record without its identity: %+v", rec)
			}
			if rec.Gap != nil {
				gaps++
				t.Errorf("a gap was marked (the writer deletes nothing): %s", r.Value)
				return
			}
			if !w.written[rec.Log] && len(invented) < 5 {
				invented = append(invented, string(r.Value))
			}
			counts[rec.Log]++
			records++
		})
	}
	var lost []string
	for msg := range w.written {
		if counts[msg] == 0 {
			lost = append(lost, msg)
		}
	}
	if len(lost) > 0 {
		explainLoss(t, root, state, p, lost, invented)
	}
	dups := records - len(counts)
	t.Logf("seed %d: %d lines written in %s across %d kill -9s and %d Kafka outages of 4 s; %d records consumed, %d duplicates (bound %d), %d lost, %d gaps marked",
		seed, total, run, kills, outages, records, dups, (kills+1)*batchLines, len(lost), gaps)
	if len(lost) > 0 {
		ranges := map[string][2]int{}
		for _, l := range lost {
			var c string
			var n int
			if _, err := fmt.Sscanf(l, "%s seq %d", &c, &n); err != nil {
				t.Errorf("lost line %q is not <container> seq <n>: %v", l, err)
				continue
			}
			r, ok := ranges[c]
			if !ok {
				r = [2]int{n, n}
			}
			r[0], r[1] = min(r[0], n), max(r[1], n)
			ranges[c] = r
		}
		t.Logf("lost seq ranges by container: %v (writer wrote about %d per container)", ranges, total/3)
		t.Fatalf("%d lines lost, e.g. %q", len(lost), lost[:min(3, len(lost))])
	}
	if len(counts) != len(w.written) {
		t.Errorf("%d distinct lines consumed, %d written: something was invented", len(counts), len(w.written))
	}
	if dups > (kills+1)*batchLines {
		t.Errorf("%d duplicates: more than one batch (%d lines) per restart (%d)", dups, batchLines, kills+1)
	}
}
