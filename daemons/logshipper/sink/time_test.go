package sink

import (
	"math/rand/v2"
	"testing"
	"time"
)

func checkAppendTime(t *testing.T, tm time.Time) {
	t.Helper()
	if got, want := string(appendTime([]byte("x"), tm)), string(tm.AppendFormat([]byte("x"), time.RFC3339Nano)); got != want {
		t.Fatalf("appendTime(%v) = %s, AppendFormat %s", tm, got, want)
	}
}

// TestAppendTimeMatchesAppendFormat: the shipper's time is the standard
// library's RFC 3339 with nanoseconds, for UTC times across the years the
// fast path takes and beyond, every count of trailing zeros, and other
// zones.
func TestAppendTimeMatchesAppendFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	east := time.FixedZone("east", 5*3600+30*60)
	n := 0
	for _, year := range []int{-1, 0, 1, 9, 999, 1970, 2026, 9999, 10000} {
		for _, ns := range []int{0, 1, 10, 100, 1000, 120000, 123456789, 999999999, 500000000} {
			for _, loc := range []*time.Location{time.UTC, east, time.Local} {
				checkAppendTime(t, time.Date(year, time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), ns, loc))
				n++
			}
		}
	}
	for range 100000 {
		checkAppendTime(t, time.Unix(rng.Int64N(253402300800), rng.Int64N(1e9)).UTC())
		n++
	}
	t.Logf("%d times formatted as AppendFormat does", n)
}

func FuzzAppendTime(f *testing.F) {
	f.Add(int64(1795000000), int64(123456789), false)
	f.Fuzz(func(t *testing.T, sec, nsec int64, utc bool) {
		tm := time.Unix(sec, nsec)
		if utc {
			tm = tm.UTC()
		}
		checkAppendTime(t, tm)
	})
}
