package logshipper

import "time"

// parseTime parses a CRI line's time as time.Parse(time.RFC3339Nano, s)
// does (TestParseTimeMatchesTimeParse, FuzzParseTime). The time a
// container runtime writes, "2006-01-02T15:04:05.999999999Z" in UTC, is
// read digit by digit: time.Parse, with the string it needs, was a
// twentieth of the shipper's CPU per line. Anything else goes to
// time.Parse.
func parseTime(s []byte) (time.Time, error) {
	var p timeParser
	return p.parse(s)
}

// timeParser is parseTime for one reader, which remembers the last second
// it read: a container's lines are mostly less than a second apart, and a
// line whose time begins with the same "YYYY-MM-DDTHH:MM:SS" as the one
// before needs only its fraction read (the date and the clock were 3% of
// the shipper's CPU in the production bench). Not safe for concurrent use.
type timeParser struct {
	sec  [19]byte  // the last second parseUTCSecond read, as written
	base time.Time // that second, with no fraction
	ok   bool      // sec and base hold one
}

// parse is parseTime(s).
func (p *timeParser) parse(s []byte) (time.Time, error) {
	if p.ok && len(s) >= 20 && s[len(s)-1] == 'Z' && string(s[:19]) == string(p.sec[:]) {
		if nsec, ok := fraction(s[19 : len(s)-1]); ok {
			return p.base.Add(time.Duration(nsec)), nil
		}
	}
	base, nsec, ok := parseUTCSecond(s)
	if !ok {
		return time.Parse(time.RFC3339Nano, string(s))
	}
	copy(p.sec[:], s)
	p.base, p.ok = base, true
	return base.Add(time.Duration(nsec)), nil
}

// parseUTCSecond reads "YYYY-MM-DDTHH:MM:SS[.F{1,9}]Z" with every field
// in its range, as the time's second and its fraction, or reports that it
// did not.
func parseUTCSecond(s []byte) (base time.Time, nsec int, ok bool) {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[len(s)-1] != 'Z' {
		return time.Time{}, 0, false
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	sec, ok6 := digits(s[17:19])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 ||
		month < 1 || month > 12 || day < 1 || day > daysIn(time.Month(month), year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, 0, false
	}
	if nsec, ok = fraction(s[19 : len(s)-1]); !ok {
		return time.Time{}, 0, false
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC), nsec, true
}

// fraction is the nanoseconds of a time's fraction of a second: nothing,
// or '.' and one to nine digits.
func fraction(frac []byte) (int, bool) {
	if len(frac) == 0 {
		return 0, true
	}
	if len(frac) < 2 || len(frac) > 10 || frac[0] != '.' {
		return 0, false
	}
	n, ok := digits(frac[1:])
	if !ok {
		return 0, false
	}
	for range 10 - len(frac) {
		n *= 10
	}
	return n, true
}

// digits is the value of s, all ASCII digits.
func digits(s []byte) (int, bool) {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// daysIn is the number of days in month of year.
func daysIn(month time.Month, year int) int {
	if month == time.February {
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	}
	return 31 - int(month-1)%7%2
}
