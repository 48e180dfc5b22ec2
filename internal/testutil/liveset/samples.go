package liveset

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Tally accounts a watcher's samples: how many, how many errored, the
// lowest count, and the samples under a minimum. Safe for concurrent use.
type Tally struct {
	What    string
	Minimum int

	mu      sync.Mutex
	start   time.Time
	end     time.Time
	samples int
	errors  []string
	min     int
	under   []string
}

// Add records one sample taken at now: a count, or an error.
func (t *Tally) Add(now time.Time, n int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.samples == 0 {
		t.start, t.min = now, n
	}
	t.end = now
	t.samples++
	if err != nil {
		t.errors = append(t.errors, fmt.Sprintf("%s: %v", now.Format(time.TimeOnly), err))
		return
	}
	if len(t.errors) == t.samples-1 || n < t.min {
		t.min = n
	}
	if n < t.Minimum {
		t.under = append(t.under, fmt.Sprintf("%s: %d %s < %d", now.Format(time.TimeOnly), n, t.What, t.Minimum))
	}
}

// Summary is what a Tally saw.
type Summary struct {
	Samples, Errors, Min int
	Span                 time.Duration
	Under, ErrorSamples  []string
}

// Summary returns the tally so far.
func (t *Tally) Summary() Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Summary{Samples: t.samples, Errors: len(t.errors), Min: t.min, Span: t.end.Sub(t.start),
		Under: slices.Clone(t.under), ErrorSamples: slices.Clone(t.errors)}
}

// Check returns every way the samples fail: under the minimum at least
// once, fewer than minRate good samples per second over over (the whole
// watched period, not the span of the samples: a watcher that stalled is
// caught), or more than maxErrors (a fraction) of them errored.
func (s Summary) Check(over time.Duration, minRate, maxErrors float64) []string {
	var out []string
	if len(s.Under) > 0 {
		out = append(out, fmt.Sprintf("%d sample(s) under the minimum, first %s", len(s.Under), s.Under[0]))
	}
	good := s.Samples - s.Errors
	if want := minRate * over.Seconds(); float64(good) < want {
		out = append(out, fmt.Sprintf("%d good sample(s) over %s, want at least %.0f (%.1f/s)", good, over.Round(time.Second), want, minRate))
	}
	if s.Samples == 0 || float64(s.Errors) > maxErrors*float64(s.Samples) {
		first := ""
		if len(s.ErrorSamples) > 0 {
			first = ", first " + s.ErrorSamples[0]
		}
		out = append(out, fmt.Sprintf("%d of %d sample(s) errored, more than %.0f%%%s", s.Errors, s.Samples, 100*maxErrors, first))
	}
	return out
}

// Gaps checks that ticks (in any order, repeats allowed: shipping is at
// least once) are exactly 1..last: it returns the missing numbers (at most
// limit) and any beyond last or below 1.
func Gaps(ticks []int, last, limit int) (missing, outside []int) {
	have := map[int]bool{}
	for _, t := range ticks {
		if t < 1 || t > last {
			outside = append(outside, t)
			continue
		}
		have[t] = true
	}
	for i := 1; i <= last && len(missing) < limit; i++ {
		if !have[i] {
			missing = append(missing, i)
		}
	}
	slices.Sort(outside)
	return missing, slices.Compact(outside)
}
