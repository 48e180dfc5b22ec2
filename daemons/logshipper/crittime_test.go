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
	_, _, fast := parseUTCSecond([]byte(s))
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

// checkTimeParser: p reads s as time.Parse does, whatever it read before.
func checkTimeParser(t *testing.T, p *timeParser, s string) {
	t.Helper()
	got, gotErr := p.parse([]byte(s))
	want, wantErr := time.Parse(time.RFC3339Nano, s)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("timeParser.parse(%q): error %v, time.Parse's %v", s, gotErr, wantErr)
	}
	if got != want {
		t.Fatalf("timeParser.parse(%q) = %v, time.Parse %v", s, got, want)
	}
}

// TestTimeParserMatchesTimeParse: one parser, which reads only the
// fraction of a time in the second it read last, reads runs of times in
// one second, times a second or a day apart, and near misses sharing the
// remembered second, as time.Parse reads each alone.
func TestTimeParserMatchesTimeParse(t *testing.T) {
	var p timeParser
	// Nothing remembered yet: a time of NULs must not match the empty
	// memory.
	for _, s := range []string{"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00Z",
		"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00.5Z"} {
		checkTimeParser(t, &p, s)
	}
	second := "2026-11-22T00:00:00"
	for _, s := range []string{second + ".5Z", second + "Z", second + ".000000001Z", second + ".999999999Z",
		second + ".12a4Z", second + ".Z", second + ".1234567890Z", second + ",5Z", second + ".5+01:00", second + "+00:00",
		second + ".5z", second + "5Z", second + "Z", second + ".25Z", "2026-11-22T00:00:01.25Z", second + ".25Z"} {
		checkTimeParser(t, &p, s)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	runs := 0
	for range 20000 {
		tm := time.Unix(rng.Int64N(253402300800-86400), rng.Int64N(1e9)).UTC()
		for range 1 + rng.IntN(8) {
			checkTimeParser(t, &p, tm.Format(time.RFC3339Nano))
			runs++
			switch rng.IntN(4) {
			case 0:
				tm = tm.Add(time.Duration(rng.Int64N(1e6))) // mostly the same second
			case 1:
				tm = tm.Truncate(time.Second).Add(time.Second) // the next, whole
			case 2:
				tm = tm.Add(24 * time.Hour) // the same clock, the next day
			default:
				tm = tm.Add(time.Duration(rng.Int64N(1e9)))
			}
		}
	}
	t.Logf("%d times read in runs", runs)
}

func FuzzTimeParser(f *testing.F) {
	f.Add("2026-11-22T00:00:01.000123Z", "2026-11-22T00:00:01.5Z")
	f.Add("2024-02-29T23:59:59.999999999Z", "2024-02-29T23:59:59.Z")
	f.Fuzz(func(t *testing.T, a, b string) {
		var p timeParser
		checkTimeParser(t, &p, a)
		checkTimeParser(t, &p, b)
	})
}

// BenchmarkParseTime reads a container's times, 300 µs apart, alone
// (parseTime) and with a parser that remembers the second.
func BenchmarkParseTime(b *testing.B) {
	base := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	ts := make([][]byte, 1000)
	for i := range ts {
		ts[i] = []byte(base.Add(time.Duration(i) * 300 * time.Microsecond).Format(time.RFC3339Nano))
	}
	var p timeParser
	for _, c := range []struct {
		name  string
		parse func([]byte) (time.Time, error)
	}{{"alone", parseTime}, {"parser", p.parse}} {
		b.Run(c.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, err := c.parse(ts[i%len(ts)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
