package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// checker counts what a consumer read against the input: every file's
// lines once each, in order, and enriched when they should be.
type checker struct {
	in      input
	seen    map[string][]uint8 // by podLog.key, per line number
	last    map[string]int
	records int
	// dup: lines read more than once; foreign: records of no input line;
	// reordered: lines read after a later line of their file; plain:
	// records without the pod's labels, service or owning Deployment.
	dup, foreign, reordered, plain int
}

func newChecker(in input) *checker {
	c := &checker{in: in, seen: map[string][]uint8{}, last: map[string]int{}}
	for _, l := range in.logs {
		c.seen[l.key()] = make([]uint8, in.perFile)
		c.last[l.key()] = -1
	}
	return c
}

func (c *checker) add(value []byte) {
	c.records++
	var r struct {
		Log, UID, Container, Service string
		Labels                       map[string]string
		Workload                     struct{ Kind, Name string }
	}
	if err := json.Unmarshal(value, &r); err != nil {
		c.foreign++
		return
	}
	lines, ok := c.seen[r.UID+"/"+r.Container]
	_, after, _ := strings.Cut(r.Log, "items/")
	num, _, _ := strings.Cut(after, " ")
	j, err := strconv.Atoi(num)
	if !ok || err != nil || j < 0 || j >= len(lines) {
		c.foreign++
		return
	}
	k := r.UID + "/" + r.Container
	if lines[j] > 0 {
		c.dup++
	}
	lines[j]++
	if j < c.last[k] {
		c.reordered++
	}
	c.last[k] = max(c.last[k], j)
	// Every bench pod is a Deployment's (through its ReplicaSet).
	if r.Service == "" || len(r.Labels) == 0 || r.Workload.Kind != "Deployment" || r.Workload.Name == "" {
		c.plain++
	}
}

// missing counts the input lines never read.
func (c *checker) missing() int {
	n := 0
	for _, lines := range c.seen {
		for _, v := range lines {
			if v == 0 {
				n++
			}
		}
	}
	return n
}

// report says what was read and returns an error unless every line
// arrived exactly once. enriched: every record must carry the pod's
// service, labels and owning Deployment.
func (c *checker) report(who string, enriched bool) error {
	miss := c.missing()
	fmt.Printf("  %s: %d records for %d lines of %d files: %d missing, %d duplicated, %d foreign, %d out of order within their file; %d without labels or workload\n",
		who, c.records, c.in.lines(), len(c.in.logs), miss, c.dup, c.foreign, c.reordered, c.plain)
	if miss > 0 || c.dup > 0 || c.foreign > 0 {
		return fmt.Errorf("%s: lines were not read exactly once (%d missing, %d duplicated, %d foreign)", who, miss, c.dup, c.foreign)
	}
	if enriched && c.plain > 0 {
		return fmt.Errorf("%s: %d records without the pod's service, labels or workload", who, c.plain)
	}
	return nil
}

// checkFile reads a file sink's JSON lines.
func checkFile(path string, c *checker) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open the file sink's output: %w", err)
	}
	defer f.Close()
	return scanLines(f, c)
}

func scanLines(r io.Reader, c *checker) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		c.add(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read records: %w", err)
	}
	return nil
}

// kcatProbe asks the broker for its metadata with kcat, which first
// negotiates API versions (librdkafka's ApiVersionRequest); it returns
// kcat's version line and the brokers and topics it saw.
func kcatProbe(addr string) (string, error) {
	v, _ := exec.Command("kcat", "-V").CombinedOutput()
	version := ""
	for _, l := range strings.Split(string(v), "\n") {
		// "Version 1.7.1 (JSON, ..., librdkafka 2.0.2 builtin.features=...)"
		if rest, ok := strings.CutPrefix(l, "Version "); ok {
			kcat, _, _ := strings.Cut(rest, " ")
			_, lib, _ := strings.Cut(rest, "librdkafka ")
			lib, _, _ = strings.Cut(lib, " ")
			version = kcat + " (librdkafka " + lib + ")"
		}
	}
	out, err := exec.Command("kcat", "-b", addr, "-L", "-m", "10", "-X", "api.version.request=true", "-d", "protocol").CombinedOutput()
	if err != nil {
		return version, fmt.Errorf("kcat -L against %s: %w: %s", addr, err, lastLines(string(out), 5))
	}
	// "... Received ApiVersionResponse (v3, 786 bytes, CorrId 1, rtt 0.61ms)"
	apiVersions, brokers := "", ""
	for _, l := range strings.Split(string(out), "\n") {
		if _, resp, ok := strings.Cut(l, "Received ApiVersionResponse ("); ok && apiVersions == "" {
			apiVersions, _, _ = strings.Cut(resp, ",")
		}
		if t := strings.TrimSpace(l); strings.HasSuffix(t, "brokers:") || strings.HasSuffix(t, "topics:") {
			brokers += strings.TrimSuffix(t, ":") + ", "
		}
	}
	if apiVersions == "" {
		return version, fmt.Errorf("kcat -L got no ApiVersionResponse from %s: %s", addr, lastLines(string(out), 5))
	}
	return fmt.Sprintf("kcat %s talks to kfake: ApiVersionResponse %s received, metadata: %s", version, apiVersions, strings.TrimSuffix(brokers, ", ")), nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], " | ")
}

// consumeKcat reads every topic from its start to its end with kcat (one
// process per topic) into c, and returns kcat's CPU.
func consumeKcat(addr string, topics []string, c *checker) (time.Duration, error) {
	var cpu time.Duration
	for _, t := range topics {
		cmd := exec.Command("kcat", "-C", "-b", addr, "-t", t, "-o", "beginning", "-e", "-q", "-f", "%s\n")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return cpu, fmt.Errorf("kcat stdout: %w", err)
		}
		if err := cmd.Start(); err != nil {
			return cpu, fmt.Errorf("start kcat on %s: %w", t, err)
		}
		serr := scanLines(out, c)
		werr := cmd.Wait()
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if err := errors.Join(serr, werr); err != nil {
			return cpu, fmt.Errorf("kcat on topic %s: %w: %s", t, err, lastLines(stderr.String(), 5))
		}
	}
	return cpu, nil
}

// consumeFranz is the fallback consumer, franz-go in this process: it
// reads the topics until it has want records or nothing came for 10s.
// It returns the bench process's CPU while it ran.
func consumeFranz(addr string, topics []string, want int, c *checker) (time.Duration, error) {
	cpu0 := cpuTime(os.Getpid())
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, fmt.Errorf("make the franz-go consumer: %w", err)
	}
	defer cl.Close()
	idle := time.Now()
	for c.records < want && time.Since(idle) < 10*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			c.add(r.Value)
			idle = time.Now()
		})
	}
	return cpuTime(os.Getpid()) - cpu0, nil
}
