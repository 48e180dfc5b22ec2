package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// schedStats are karmada-scheduler's counters: bindings scheduled, and the
// seconds spent on them end to end (reading the binding, the algorithm,
// writing the result and its status) and in the algorithm alone.
type schedStats struct {
	schedules, e2e, algorithm float64
	// steps are the algorithm's seconds by step (Filter, Score, Select,
	// AssignReplicas).
	steps map[string]float64
}

func schedulerStats(ctx context.Context, url string) (schedStats, error) {
	s := schedStats{steps: map[string]float64{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, fmt.Errorf("karmada-scheduler metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "karmada_scheduler_e2e_scheduling_duration_seconds_count{"):
			s.schedules += v
		case strings.HasPrefix(line, "karmada_scheduler_e2e_scheduling_duration_seconds_sum{"):
			s.e2e += v
		case strings.HasPrefix(line, "karmada_scheduler_scheduling_algorithm_duration_seconds_sum{"):
			s.algorithm += v
			if _, rest, ok := strings.Cut(line, `schedule_step="`); ok {
				step, _, _ := strings.Cut(rest, `"`)
				s.steps[step] += v
			}
		}
	}
	return s, nil
}

// String says what the scheduler did between before and s, over a run
// that lasted run.
func (s schedStats) since(before schedStats, run time.Duration) string {
	n := s.schedules - before.schedules
	if n == 0 {
		return "karmada-scheduler: no schedules"
	}
	e2e, alg := s.e2e-before.e2e, s.algorithm-before.algorithm
	var steps []string
	for _, st := range []string{"Filter", "Score", "Select", "AssignReplicas"} {
		steps = append(steps, fmt.Sprintf("%s %.0f", st, 1000*(s.steps[st]-before.steps[st])/n))
	}
	return fmt.Sprintf("karmada-scheduler: %.0f schedules, %.0f ms each end to end (algorithm %.0f ms: %s), busy %.0f s of the run's %.0f s",
		n, 1000*e2e/n, 1000*alg/n, strings.Join(steps, ", "), e2e, run.Seconds())
}
