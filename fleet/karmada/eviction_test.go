package karmada

import (
	"testing"
	"time"
)

func TestEvictionBound(t *testing.T) {
	for _, c := range []struct {
		rate   float32
		queued int
		want   time.Duration
	}{
		{0, 150, 10 * time.Second},    // Trellis's default: 3 workers at 5/s
		{0.5, 150, 100 * time.Second}, // Karmada's default
		{5, 0, 0},
	} {
		if got := (Options{EvictionRate: c.rate}).EvictionBound(c.queued); got != c.want {
			t.Errorf("rate %g, %d queued: bound %s, want %s", c.rate, c.queued, got, c.want)
		}
	}
}
