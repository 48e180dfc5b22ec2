package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/internal/procstat"
)

type bench struct {
	o options
	e *env
	// results for the closing table
	submits           []submitRun
	rssMiB, heapMiB   float64
	rssAfterReadsMiB  float64
	gwReads, dirReads readResult
}

type readResult struct {
	sum                 summary
	byCaller, byAll     int
	byResource          map[string]int
	apiserverCPU, gwCPU time.Duration
	etcdCPU, benchCPU   time.Duration
	achieved            float64
	handled             float64 // reads the gateway answered, its clients waiting or not
}

const digest = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// workload j lives in namespace team-(j mod namespaces).
func (b *bench) ns(j int) string   { return fmt.Sprintf("team-%d", j%b.o.namespaces) }
func name(j int) string            { return fmt.Sprintf("w-%05d", j) }
func (b *bench) body(j int) []byte { return serviceYAML(b.ns(j), name(j)) }

func serviceYAML(ns, name string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: workloads.trellis.dev/v1alpha1
kind: TrellisService
metadata:
  name: %s
  namespace: %s
spec:
  replicas: 2
  ports:
  - name: http
    port: 8080
  template:
    containers:
    - name: web
      image: %s/%s/web%s
      resources:
        requests: {cpu: 100m, memory: 64Mi}
        limits: {cpu: 100m, memory: 64Mi}
`, name, ns, registry, ns, digest))
}

// callerFor is a caller of workload j's namespace, varying with i.
func (b *bench) callerFor(j, i int) *caller {
	per := b.o.identities / b.o.namespaces
	return b.e.callers[j%b.o.namespaces+b.o.namespaces*(i%per)]
}

func (b *bench) gwRequest(c *caller, method, path string, body []byte) *http.Request {
	req, _ := http.NewRequest(method, b.e.url+path, bytes.NewReader(body))
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/yaml")
	}
	req.Header.Set("User-Agent", "bench-gateway")
	return req
}

// submitRun is one rate's submissions.
type submitRun struct {
	rate    float64
	sum     summary
	cpu     time.Duration // trellis-gateway's
	handled float64       // submissions the gateway answered, its clients waiting or not
}

// submissions: at each rate in turn, workload i by a caller of its
// namespace.
func (b *bench) submissions(context.Context) error {
	first := 0
	for _, rate := range b.o.submitRates {
		n := int(rate * b.o.submitFor.Seconds())
		fmt.Printf("== submissions: %d at %.0f/s from %d identities (load average %s)\n", n, rate, b.o.identities, loadavg())
		pids := b.pids()
		h0 := b.gatewayMetric(`trellis_gateway_requests_total{action="submit"`)
		cpu0, sch0, t0 := procstat.SampleCPU(pids), sampleSched(pids), time.Now()
		samples := paced(n, rate, func(i int) (*http.Response, error) {
			j := first + i
			c := b.callerFor(j, j/b.o.namespaces)
			return c.gw.Do(b.gwRequest(c, http.MethodPost, "/v1/workloads", b.body(j)))
		})
		wall := time.Since(t0)
		cpu1, sch1 := procstat.SampleCPU(pids), sampleSched(pids)
		time.Sleep(time.Second) // let the gateway finish what its clients gave up on
		r := submitRun{rate: rate, cpu: cpu1[gatewayName] - cpu0[gatewayName], handled: b.gatewayMetric(`trellis_gateway_requests_total{action="submit"`) - h0}
		first += n
		for i := range samples {
			if t := samples[i].timing; t != nil {
				t["gateway+cache"] = t["gateway"] + t["cache"]
			}
		}
		r.sum = summarize(samples, wall)
		s := r.sum
		fmt.Printf("sent %d, accepted %d, failed %d %v; sender late p99 %.1f ms\n", s.sent, s.ok, s.failed, s.errs, ms(s.lateP99))
		for _, k := range []string{"gateway", "apiserver", "apiserver.requests", "cache", "gateway+cache", "total"} {
			v := s.timing[k]
			fmt.Printf("  %-20s p50 %7.2f  p99 %7.2f  max %7.2f\n", k, pct(v, 50), pct(v, 99), pct(v, 100))
		}
		fmt.Printf("  %-20s p50 %7.2f  p99 %7.2f  (client side, ms)\n", "latency", ms(pct(s.lat, 50)), ms(pct(s.lat, 99)))
		procstat.PrintCPU(os.Stdout, "submissions", cpu0, cpu1, wall, 0)
		fmt.Printf("  trellis-gateway answered %.0f submissions, %.2f ms of its CPU each\n", r.handled, ms(r.cpu)/max(1, r.handled))
		printSched(sch0, sch1, gatewayName, "kube-apiserver", "etcd", "bench (load generator)")
		fmt.Println()
		b.submits = append(b.submits, r)
	}
	return nil
}

// gatewayMetric sums the gateway's /metrics samples whose line starts
// with prefix.
func (b *bench) gatewayMetric(prefix string) float64 {
	resp, err := b.e.httpClient(nil).Get(b.e.url + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, prefix) {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// fill creates the rest of the workloads directly, then waits until the
// gateway's cache holds them all, and measures its memory.
func (b *bench) fill(ctx context.Context) error {
	fmt.Printf("== %d workloads cached (those the submissions did not write created directly)\n", b.o.workloads)
	dyn, err := dynamic.NewForConfig(b.e.cp.Config)
	if err != nil {
		return err
	}
	gvr := v1alpha1.GroupVersion.WithResource("trellisservices")
	next := atomic.Int64{}
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := int(next.Add(1) - 1); j < b.o.workloads; j = int(next.Add(1) - 1) {
				u := &unstructured.Unstructured{}
				if err := yaml.Unmarshal(b.body(j), &u.Object); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				if _, err := dyn.Resource(gvr).Namespace(b.ns(j)).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					firstErr.CompareAndSwap(nil, fmt.Errorf("create %s: %w", name(j), err))
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := b.gatewayCount(ctx)
		if err != nil {
			return err
		}
		if got >= b.o.workloads {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the gateway lists %d workloads of %d after 2 min", got, b.o.workloads)
		}
		time.Sleep(2 * time.Second)
	}
	time.Sleep(5 * time.Second) // let the lists' garbage be collected
	b.rssMiB, b.heapMiB, err = b.memory()
	if err != nil {
		return err
	}
	fmt.Printf("gateway RSS %.1f MiB, Go heap in use %.1f MiB\n\n", b.rssMiB, b.heapMiB)
	return nil
}

func (b *bench) gatewayCount(ctx context.Context) (int, error) {
	total := 0
	for n := range b.o.namespaces {
		c := b.callerFor(n, 0)
		resp, err := c.gw.Do(b.gwRequest(c, http.MethodGet, "/v1/namespaces/"+b.ns(n)+"/workloads?kind=TrellisService", nil).WithContext(ctx))
		if err != nil {
			return 0, err
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("gateway list: HTTP %d: %s", resp.StatusCode, body.String())
		}
		total += bytes.Count(body.Bytes(), []byte(`"kind":"TrellisService"`))
	}
	return total, nil
}

// memory is the gateway's resident set (/proc) and Go heap in use (its
// /metrics).
func (b *bench) memory() (rss, heap float64, err error) {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.e.gatewayPID()))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			rss = kb / 1024
		}
	}
	resp, err := b.e.httpClient(nil).Get(b.e.url + "/metrics")
	if err != nil {
		return rss, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			heap = f / (1 << 20)
		}
	}
	return rss, heap, sc.Err()
}

func (b *bench) pids() map[string]int {
	p := b.e.cp.PIDs()
	p["bench (load generator)"] = os.Getpid()
	return p
}

// gatewayReads: get and status of workloads through the gateway.
func (b *bench) gatewayReads(ctx context.Context) error {
	fmt.Printf("== reads through the gateway: %.0f/s for %s\n", b.o.readRate, b.o.readFor)
	// Warm each caller's authorization (a first read costs one review).
	for i := range b.e.callers {
		c := b.e.callers[i]
		resp, err := c.gw.Do(b.gwRequest(c, http.MethodGet, "/v1/namespaces/"+c.ns+"/workloads/trellisservices/"+name(i%b.o.namespaces), nil))
		if err != nil {
			return err
		}
		resp.Body.Close()
	}
	r, err := b.reads(ctx, gateway.UserAgent, func(j, i int) (*http.Response, error) {
		c := b.callerFor(j, i)
		path := "/v1/namespaces/" + b.ns(j) + "/workloads/trellisservices/" + name(j)
		if i%2 == 1 {
			path += "/status"
		}
		return c.gw.Do(b.gwRequest(c, http.MethodGet, path, nil))
	})
	b.gwReads = r
	b.rssAfterReadsMiB, _, _ = b.memory()
	return err
}

// directReads: the same workloads read from kube-apiserver by the same
// identities (ServiceAccount tokens of its own audience).
func (b *bench) directReads(ctx context.Context) error {
	fmt.Printf("== the same reads directly against kube-apiserver: %.0f/s for %s\n", b.o.readRate, b.o.readFor)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.e.cp.CAPEM())
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	r, err := b.reads(ctx, "bench-direct", func(j, i int) (*http.Response, error) {
		c := b.callerFor(j, i)
		req, _ := http.NewRequest(http.MethodGet, b.e.cp.APIURL+"/apis/workloads.trellis.dev/v1alpha1/namespaces/"+b.ns(j)+"/trellisservices/"+name(j), nil)
		req.Header.Set("Authorization", "Bearer "+c.direct)
		req.Header.Set("User-Agent", "bench-direct")
		return hc.Do(req)
	})
	b.dirReads = r
	return err
}

// reads runs the read load and counts what it cost the apiserver: every
// request in the window, and those of the user agent ua (the gateway's, or
// the direct readers') by verb and resource.
func (b *bench) reads(_ context.Context, ua string, do func(j, i int) (*http.Response, error)) (readResult, error) {
	n := int(b.o.readRate * b.o.readFor.Seconds())
	pids := b.pids()
	h0 := b.gatewayMetric(`trellis_gateway_requests_total{action="get"`) + b.gatewayMetric(`trellis_gateway_requests_total{action="status"`)
	cpu0, sch0, from := procstat.SampleCPU(pids), sampleSched(pids), time.Now()
	samples := paced(n, b.o.readRate, func(i int) (*http.Response, error) { return do((i*7919)%b.o.workloads, i) })
	to := time.Now()
	cpu1, sch1 := procstat.SampleCPU(pids), sampleSched(pids)
	wall := to.Sub(from)
	time.Sleep(time.Second) // let the gateway finish what its clients gave up on
	r := readResult{sum: summarize(samples, wall), byResource: map[string]int{}}
	r.handled = b.gatewayMetric(`trellis_gateway_requests_total{action="get"`) + b.gatewayMetric(`trellis_gateway_requests_total{action="status"`) - h0
	r.achieved = float64(r.sum.ok) / wall.Seconds()
	time.Sleep(2 * time.Second) // the audit log is written in batches
	evs, err := b.e.cp.ReadAudit("", from, to)
	if err != nil {
		return r, err
	}
	r.byAll = len(evs)
	for _, ev := range evs {
		if strings.HasPrefix(ev.UserAgent, ua) {
			r.byCaller++
			r.byResource[ev.Verb+" "+ev.Resource()]++
		}
	}
	used := func(n string) time.Duration { return cpu1[n] - cpu0[n] }
	r.apiserverCPU, r.etcdCPU, r.gwCPU, r.benchCPU = used("kube-apiserver"), used("etcd"), used(gatewayName), used("bench (load generator)")
	s := r.sum
	fmt.Printf("load average %s\n", loadavg())
	fmt.Printf("sent %d (%.0f/s answered), ok %d, failed %d %v; sender late p99 %.1f ms\n", s.sent, r.achieved, s.ok, s.failed, s.errs, ms(s.lateP99))
	fmt.Printf("  latency p50 %.2f ms, p99 %.2f ms (client side)\n", ms(pct(s.lat, 50)), ms(pct(s.lat, 99)))
	fmt.Printf("  apiserver requests in the window: %d in all, %d by %s\n", r.byAll, r.byCaller, ua)
	keys := make([]string, 0, len(r.byResource))
	for k := range r.byResource {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("    %-45s %d\n", k, r.byResource[k])
	}
	procstat.PrintCPU(os.Stdout, "reads", cpu0, cpu1, wall, 0)
	if r.handled > 0 {
		fmt.Printf("  trellis-gateway answered %.0f reads, %.2f ms of its CPU each\n", r.handled, ms(r.gwCPU)/r.handled)
	}
	if r.byCaller > 0 && ua != gateway.UserAgent {
		fmt.Printf("  kube-apiserver served %d reads, %.2f ms of its CPU each\n", r.byCaller, ms(r.apiserverCPU)/float64(r.byCaller))
	}
	printSched(sch0, sch1, gatewayName, "kube-apiserver", "etcd", "bench (load generator)")
	fmt.Println()
	return r, nil
}

// loadavg is /proc/loadavg's 1, 5 and 15 minute averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
