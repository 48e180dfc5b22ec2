package logshipper

import (
	"math/rand/v2"
	"testing"
	"time"
)

func checkParseTime(t *testing.T, s string) bool {
	t.Helper()
	got, gotErr := parseTime([]byte(s))
	want, wantErr := time.Parse(time.RFC3339Nano, s)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("parseTime(%q): error %v, time.Parse's %v", s, gotErr, wantErr)
	}
	if got != want {
		t.Fatalf("parseTime(%q) = %v, time.Parse %v", s, got, want)
	}
	_, fast := parseUTC([]byte(s))
	return fast
}

// TestParseTimeMatchesTimeParse: a CRI line's time is read as time.Parse
// reads it, for the runtime's own layout, every fraction length, the
// calendar's edges and near misses the fast path leaves to time.Parse.
func TestParseTimeMatchesTimeParse(t *testing.T) {
	cases := []string{
		"2026-11-22T00:00:00Z", "2026-11-22T00:00:00.1Z", "2026-11-22T00:00:00.000000001Z", "2026-11-22T23:59:59.999999999Z",
		"2026-11-22T00:00:00.1234567890Z", "2026-11-22T00:00:00.Z", "2026-11-22T00:00:00,5Z", "2026-11-22T00:00:00.5+01:00",
		"2026-11-22T00:00:00+00:00", "2026-11-22t00:00:00Z", "2026-11-22T00:00:00z", "2026-11-22 00:00:00Z",
		"2024-02-29T12:00:00Z", "2023-02-29T12:00:00Z", "2000-02-29T12:00:00Z", "1900-02-29T12:00:00Z",
		"2026-04-31T00:00:00Z", "2026-12-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-01-00T00:00:00Z",
		"2026-01-01T24:00:00Z", "2026-01-01T23:60:00Z", "2026-01-01T23:59:60Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
		"+026-01-01T00:00:00Z", "2026-1-01T00:00:00Z", "2026-01-01T00:00:00.12a4Z", "2026-01-01T00:00:00", "", "Z",
		"2026-01-01T00:00:00.0Z", "2026-01-01T00:00:00.000000000Z", "2026-11-22T00:00:01.000123Z",
	}
	fast := 0
	for _, s := range cases {
		if checkParseTime(t, s) {
			fast++
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		tm := time.Unix(rng.Int64N(253402300800), rng.Int64N(1e9)).UTC()
		if !checkParseTime(t, tm.Format(time.RFC3339Nano)) {
			t.Fatalf("the fast path left %s to time.Parse", tm.Format(time.RFC3339Nano))
		}
		fast++
	}
	t.Logf("%d times parsed as time.Parse does, %d by the fast path", len(cases)+100000, fast)
}

func FuzzParseTime(f *testing.F) {
	f.Add("2026-11-22T00:00:01.000123Z")
	f.Add("2024-02-29T23:59:59.999999999Z")
	f.Fuzz(func(t *testing.T, s string) { checkParseTime(t, s) })
}
