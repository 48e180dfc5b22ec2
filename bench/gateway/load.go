package main

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sample is one request's outcome: the client's latency, the status code
// and the gateway's Server-Timing entries (ms by name), when it sent them.
type sample struct {
	code    int
	err     error
	latency time.Duration
	timing  map[string]float64
	late    time.Duration // how far after its slot it was sent
}

// paced sends n requests, one every 1/rate seconds from start (open loop:
// a slow answer does not delay the next request), and returns every
// outcome in order. do builds and sends request i.
func paced(n int, rate float64, do func(i int) (*http.Response, error)) []sample {
	out := make([]sample, n)
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		slot := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(slot))
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &out[i]
			t0 := time.Now()
			s.late = t0.Sub(slot)
			resp, err := do(i)
			s.latency = time.Since(t0)
			if err != nil {
				s.err = err
				return
			}
			s.code = resp.StatusCode
			s.timing = parseServerTiming(resp.Header.Get("Server-Timing"))
			resp.Body.Close()
		}()
	}
	wg.Wait()
	return out
}

// parseServerTiming reads `name;dur=ms;desc="..", ...`.
func parseServerTiming(h string) map[string]float64 {
	if h == "" {
		return nil
	}
	m := map[string]float64{}
	for _, entry := range strings.Split(h, ",") {
		parts := strings.Split(strings.TrimSpace(entry), ";")
		for _, p := range parts[1:] {
			if v, ok := strings.CutPrefix(p, "dur="); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					m[parts[0]] = f
				}
			}
			if v, ok := strings.CutPrefix(p, "desc=\""); ok {
				if n, err := strconv.Atoi(strings.Fields(v)[0]); err == nil {
					m[parts[0]+".requests"] = float64(n)
				}
			}
		}
	}
	return m
}

// summary of a phase's samples.
type summary struct {
	sent, ok, failed int
	errs             map[string]int
	lat              []time.Duration
	timing           map[string][]float64
	lateP99          time.Duration
	wall             time.Duration
}

func summarize(samples []sample, wall time.Duration) summary {
	s := summary{sent: len(samples), errs: map[string]int{}, timing: map[string][]float64{}, wall: wall}
	var late []time.Duration
	for _, x := range samples {
		late = append(late, x.late)
		switch {
		case x.err != nil:
			s.failed++
			s.errs[errClass(x.err)]++
			continue
		case x.code >= 300:
			s.failed++
			s.errs[fmt.Sprintf("HTTP %d", x.code)]++
			continue
		}
		s.ok++
		s.lat = append(s.lat, x.latency)
		for k, v := range x.timing {
			s.timing[k] = append(s.timing[k], v)
		}
	}
	slices.Sort(late)
	s.lateP99 = pct(late, 99)
	slices.Sort(s.lat)
	for _, v := range s.timing {
		slices.Sort(v)
	}
	return s
}

func pct[T int | float64 | time.Duration](sorted []T, p float64) T {
	if len(sorted) == 0 {
		var zero T
		return zero
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// errClass names an error without its addresses and ports.
func errClass(err error) string {
	msg := err.Error()
	for _, c := range []string{"Client.Timeout", "connection reset", "connection refused", "EOF"} {
		if strings.Contains(msg, c) {
			return c
		}
	}
	return msg
}
