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

// TestTimeWriterMatchesAppendFormat: one writer, which writes only the
// fraction of a time in the second it wrote last, writes runs of times in
// one second, a second, a day or a zone apart, as AppendFormat writes
// each alone.
func TestTimeWriterMatchesAppendFormat(t *testing.T) {
	var w timeWriter
	rng := rand.New(rand.NewPCG(3, 4))
	east := time.FixedZone("east", 5*3600+30*60)
	n := 0
	for range 20000 {
		tm := time.Unix(rng.Int64N(253402300800-86400), rng.Int64N(1e9)).UTC()
		for range 1 + rng.IntN(8) {
			if got, want := string(w.append([]byte("x"), tm)), string(tm.AppendFormat([]byte("x"), time.RFC3339Nano)); got != want {
				t.Fatalf("timeWriter.append(%v) after a run = %s, AppendFormat %s", tm, got, want)
			}
			n++
			switch rng.IntN(5) {
			case 0:
				tm = tm.Add(time.Duration(rng.Int64N(1e6))) // mostly the same second
			case 1:
				tm = tm.Truncate(time.Second).Add(time.Second) // the next, whole
			case 2:
				tm = tm.Add(24 * time.Hour) // the same clock, the next day
			case 3:
				tm = tm.In(east) // the same second, another zone
			default:
				tm = tm.UTC().Add(time.Duration(rng.Int64N(1e9)))
			}
		}
	}
	t.Logf("%d times written in runs", n)
}

// BenchmarkAppendTime writes a container's times, 300 µs apart, alone
// (appendTime) and with a writer that remembers the second.
func BenchmarkAppendTime(b *testing.B) {
	base := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	ts := make([]time.Time, 1000)
	for i := range ts {
		ts[i] = base.Add(time.Duration(i) * 300 * time.Microsecond)
	}
	var w timeWriter
	for _, c := range []struct {
		name   string
		append func([]byte, time.Time) []byte
	}{{"alone", appendTime}, {"writer", w.append}} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 64)
			i := 0
			for b.Loop() {
				buf = c.append(buf[:0], ts[i%len(ts)])
				i++
			}
		})
	}
}
