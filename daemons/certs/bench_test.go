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
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
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

		// One core: raw P-256 signatures, then whole issuer requests
		// (token review cached, CSR check, signature, encoding).
		prev := runtime.GOMAXPROCS(1)
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		digest := sha256.Sum256([]byte("trellis"))
		sigs := 0
		for start := time.Now(); time.Since(start) < 2*time.Second; sigs++ {
			if _, err := ecdsa.SignASN1(rand.Reader, key, digest[:]); err != nil {
				b.Fatal(err)
			}
		}
		sigRate := float64(sigs) / 2
		sig, _ := ecdsa.SignASN1(rand.Reader, key, digest[:])
		verifies := 0
		for start := time.Now(); time.Since(start) < 2*time.Second; verifies++ {
			if !ecdsa.VerifyASN1(&key.PublicKey, digest[:], sig) {
				b.Fatal("verify failed")
			}
		}
		verifyRate := float64(verifies) / 2
		// Each certificate needs one signature and two verifications (the
		// CSR's proof of possession, and crypto/x509 checking the
		// signature it just made): the cryptographic floor.
		floor := 1 / (1/sigRate + 2/verifyRate)
		is := issuer.New(issuer.Config{TrustDomain: td, TTL: time.Hour, Client: e.c, Pods: e.lister, NodeRate: 1e9, NodeBurst: 1 << 30,
			AgentUsernames: []string{"system:serviceaccount:trellis-system:trellis-cert-agent"}}, e.is.State())
		rctx, stopRecords := context.WithCancel(context.Background())
		go is.RecordValidities(rctx, 4) // as cmd/trellis-cert-issuer runs it
		body, _ := json.Marshal(certsapi.SignRequest{Namespace: ns, Name: "web-1", UID: string(e.pods["web-1"].UID), CSR: newCSR(b)})
		issued := 0
		start := time.Now()
		for time.Since(start) < 2*time.Second {
			r := httptest.NewRequest(http.MethodPost, certsapi.SignPath, bytes.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+e.agentToken)
			w := httptest.NewRecorder()
			is.ServeHTTP(w, r)
			if w.Code != 200 {
				b.Fatalf("issuer: %d %s", w.Code, w.Body)
			}
			issued++
		}
		certRate := float64(issued) / time.Since(start).Seconds()
		records := is.Records()
		stopRecords()
		runtime.GOMAXPROCS(prev)
		// One pod here: its records are written one at a time, newest
		// dates first, so most of the loop's certificates share a patch.
		fmt.Printf("one core: %d certificates for one pod, %d validity records written onto it\n", issued, records)
		fmt.Printf("one core: %.0f ECDSA P-256 signatures/s, %.0f verifications/s; issuer %.0f certificates/s: ratio %.2f to signatures/s, %.2f to the crypto floor of %.0f certificates/s (1 sign + 2 verifies)\n",
			sigRate, verifyRate, certRate, certRate/sigRate, certRate/floor, floor)
		b.ReportMetric(certRate/floor, "floor-ratio")
		b.ReportMetric(certRate, "certs/s")
		b.ReportMetric(sigRate, "sigs/s")
		b.ReportMetric(certRate/sigRate, "ratio")
	}
}
