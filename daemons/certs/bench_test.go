package certs_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/daemons/certs/issuer"
	"github.com/trellis-dev/trellis/internal/certsapi"
)

// load sends sign requests to the agent at socket at a fixed rate (open
// loop: a slow answer does not delay the next request) for a duration, and
// prints the latencies as JSON milliseconds.
func load(socket, rateS, durS string) int {
	rate, err := strconv.Atoi(rateS)
	if err != nil || rate <= 0 {
		fmt.Fprintf(os.Stderr, "load: rate %q is not a positive number\n", rateS)
		return 2
	}
	dur, err := time.ParseDuration(durS)
	if err != nil {
		fmt.Fprintf(os.Stderr, "load: %v\n", err)
		return 2
	}
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	csr := newCSR(nil)
	var mu sync.Mutex
	var lat []float64
	var errs int
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(dur)
	for time.Now().Before(end) {
		<-tick.C
		wg.Go(func() {
			start := time.Now()
			resp, err := c.Post("http://agent"+certsapi.SignPath, "application/x-pem-file", bytes.NewReader(csr))
			ok := err == nil && resp.StatusCode == 200
			if resp != nil {
				var out certsapi.SignResponse
				_ = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
			}
			d := float64(time.Since(start).Microseconds()) / 1000
			mu.Lock()
			if ok {
				lat = append(lat, d)
			} else {
				errs++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"latencies": lat, "errors": errs})
	return 0
}

// signRequests makes the one-core loop's requests and takes their answers
// with as little of the harness's own work as it can: the loop times the
// issuer's handler, not httptest.
type signRequests struct {
	url    *url.URL
	header http.Header
	body   []byte
	w      discardWriter
}

func newSignRequests(body []byte, token string) *signRequests {
	return &signRequests{
		url:    &url.URL{Path: certsapi.SignPath},
		header: http.Header{"Authorization": {"Bearer " + token}},
		body:   body,
		w:      discardWriter{header: http.Header{}},
	}
}

func (s *signRequests) serve(h http.Handler) *discardWriter {
	s.w.code, s.w.wrote = 0, false
	s.w.body.Reset()
	r := &http.Request{Method: http.MethodPost, URL: s.url, Header: s.header, Body: io.NopCloser(bytes.NewReader(s.body)), ContentLength: int64(len(s.body))}
	h.ServeHTTP(&s.w, r)
	return &s.w
}

// discardWriter is a ResponseWriter that keeps the status and the body of
// the last answer, reusing its buffers.
type discardWriter struct {
	header http.Header
	code   int
	wrote  bool
	body   bytes.Buffer
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// profileLoop writes a CPU profile of the one-core issuance loop to
// $TRELLIS_ISSUANCE_PROFILE, when set: everything the process does while
// the loop runs, not only the issuer's handler.
func profileLoop(b *testing.B) (stop func()) {
	path := os.Getenv("TRELLIS_ISSUANCE_PROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatalf("issuance profile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatalf("issuance profile: %v", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Errorf("issuance profile: %v", err)
		}
	}
}

// cryptoFloor is the certificates/s of the crypto alone: each certificate
// needs one signature and two verifications (the CSR's proof of
// possession, and the check of the signature just made, as crypto/x509
// does).
func cryptoFloor(sigsPerSec, verifiesPerSec float64) float64 {
	return 1 / (1/sigsPerSec + 2/verifiesPerSec)
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// BenchmarkIssuance prints the issuance latency through the agent at 100
// requests/s from one pod (target p99 < 10 ms), and the issuer's
// certificates/s on one core against ECDSA P-256 signatures/s on one core
// measured in the same run. Run it with -benchtime=1x: each part has its
// own fixed duration.
func BenchmarkIssuance(b *testing.B) {
	e := newEnv(b, time.Hour)
	e.stopAgent()
	e.agentCfg.PodRate, e.agentCfg.PodBurst = 10000, 10000
	e.startAgent()
	for range b.N {
		// Warm up (TLS to the issuer, token review cache), then measure.
		_ = e.inPod(e.pods["web-1"].UID, "load", e.socket, "20", "1s").Run()
		out, err := e.inPod(e.pods["web-1"].UID, "load", e.socket, "100", "10s").Output()
		if err != nil {
			b.Fatalf("load: %v", err)
		}
		var res struct {
			Latencies []float64 `json:"latencies"`
			Errors    int       `json:"errors"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			b.Fatal(err)
		}
		slices.Sort(res.Latencies)
		p50, p99 := percentile(res.Latencies, 0.50), percentile(res.Latencies, 0.99)
		fmt.Printf("issuance through the agent at 100 req/s: %d ok, %d errors; p50 %.2f ms, p99 %.2f ms (target p99 < 10 ms)\n",
			len(res.Latencies), res.Errors, p50, p99)
		b.ReportMetric(p50, "p50-ms")
		b.ReportMetric(p99, "p99-ms")

		// One core: raw P-256 signatures, verifications and whole issuer
		// requests (token review cached, CSR check, signature, encoding),
		// interleaved in rounds so that the floor and the issuer are timed
		// on the same machine state: a shared machine's speed drifts over
		// seconds.
		prev := runtime.GOMAXPROCS(1)
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		digest := sha256.Sum256([]byte("trellis"))
		sig, _ := ecdsa.SignASN1(rand.Reader, key, digest[:])
		is := issuer.New(issuer.Config{TrustDomain: td, TTL: time.Hour, Client: e.c, Pods: e.lister, NodeRate: 1e9, NodeBurst: 1 << 30,
			AgentUsernames: []string{"system:serviceaccount:trellis-system:trellis-cert-agent"}}, e.is.State())
		rctx, stopRecords := context.WithCancel(context.Background())
		go is.RecordValidities(rctx, 4) // as cmd/trellis-cert-issuer runs it
		body, _ := json.Marshal(certsapi.SignRequest{Namespace: ns, Name: "web-1", UID: string(e.pods["web-1"].UID), CSR: newCSR(b)})
		req := newSignRequests(body, e.agentToken)
		const rounds, slice = 5, 400 * time.Millisecond
		var sigs, verifies, issued int
		var sigTime, verifyTime, issueTime, cpu time.Duration
		stopProfile := profileLoop(b)
		// Each round's rates, printed after the loop: whether the floor
		// or the issuer moves when a run's ratio does.
		var perRound []string
		for r := range rounds {
			s0, v0, i0 := sigs, verifies, issued
			st0, vt0, it0 := sigTime, verifyTime, issueTime
			start := time.Now()
			for ; time.Since(start) < slice; sigs++ {
				if _, err := ecdsa.SignASN1(rand.Reader, key, digest[:]); err != nil {
					b.Fatal(err)
				}
			}
			sigTime += time.Since(start)
			start = time.Now()
			for ; time.Since(start) < slice; verifies++ {
				if !ecdsa.VerifyASN1(&key.PublicKey, digest[:], sig) {
					b.Fatal("verify failed")
				}
			}
			verifyTime += time.Since(start)
			cpuStart := processCPU(b)
			start = time.Now()
			for ; time.Since(start) < slice; issued++ {
				w := req.serve(is)
				if w.code != http.StatusOK {
					b.Fatalf("issuer: %d %s", w.code, w.body.String())
				}
			}
			issueTime += time.Since(start)
			cpu += processCPU(b) - cpuStart
			rs := float64(sigs-s0) / (sigTime - st0).Seconds()
			rv := float64(verifies-v0) / (verifyTime - vt0).Seconds()
			ri := float64(issued-i0) / (issueTime - it0).Seconds()
			perRound = append(perRound, fmt.Sprintf("  round %d: %.0f signatures/s, %.0f verifications/s, issuer %.0f certificates/s: %.3f of the floor", r+1, rs, rv, ri, ri/cryptoFloor(rs, rv)))
		}
		stopProfile()
		fmt.Println(strings.Join(perRound, "\n"))
		sigRate := float64(sigs) / sigTime.Seconds()
		verifyRate := float64(verifies) / verifyTime.Seconds()
		certRate := float64(issued) / issueTime.Seconds()
		floor := cryptoFloor(sigRate, verifyRate)
		records := is.Records()
		stopRecords()
		runtime.GOMAXPROCS(prev)
		// One pod here: its records are written one at a time, newest
		// dates first, so most of the loop's certificates share a patch.
		fmt.Printf("one core: %d certificates for one pod, %d validity records written onto it; the process used %.2f CPU-s in the issuer's %.2f s (%.0f certificates per CPU-second)\n",
			issued, records, cpu.Seconds(), issueTime.Seconds(), float64(issued)/cpu.Seconds())
		fmt.Printf("one core, %d interleaved rounds: %.0f ECDSA P-256 signatures/s, %.0f verifications/s; issuer %.0f certificates/s: ratio %.2f to signatures/s, %.2f to the crypto floor of %.0f certificates/s (1 sign + 2 verifies)\n",
			rounds, sigRate, verifyRate, certRate, certRate/sigRate, certRate/floor, floor)
		b.ReportMetric(certRate/floor, "floor-ratio")
		b.ReportMetric(certRate, "certs/s")
		b.ReportMetric(sigRate, "sigs/s")
		b.ReportMetric(certRate/sigRate, "ratio")
	}
}
