package backtest

import (
	"time"

	"github.com/trellis-dev/trellis/governance/forecast"
)

// Lead is what `quota watch` would have said about one series: a quota set
// at Quota on day QuotaDay, checked once a day after it.
type Lead struct {
	Quota float64
	// Alerted is when the forecast first crossed the quota within Within
	// (zero if never); Crossed when usage first exceeded it (zero if
	// never).
	Alerted, Crossed time.Time
}

// LeadTime is Crossed - Alerted, when both happened.
func (l Lead) LeadTime() (time.Duration, bool) {
	if l.Alerted.IsZero() || l.Crossed.IsZero() {
		return 0, false
	}
	return l.Crossed.Sub(l.Alerted), true
}

// AlertLead sets series i's quota to the peak of the 30 days before
// quotaDay plus headroom, then from that day checks daily, as `quota
// watch` does, whether the forecast's band crosses the quota within
// `within`.
func AlertLead(c Config, f Family, i, quotaDay int, headroom float64, within time.Duration, opts forecast.Options) Lead {
	s := c.Series(f, i)
	at := c.Start.Add(time.Duration(quotaDay) * day)
	steps, _ := PeakPlanner{Headroom: headroom, Retention: 30 * day}.Plan(s.Slice(0, s.Index(at)), at, day)
	l := Lead{Quota: steps[0].Value}
	for j := s.Index(at); j < len(s.Values); j++ {
		if s.Values[j] > l.Quota {
			l.Crossed = s.Time(j)
			break
		}
	}
	end := c.Start.Add(time.Duration(c.Days) * day)
	for now := at; now.Before(end) && (l.Crossed.IsZero() || now.Before(l.Crossed)); now = now.Add(day) {
		m, err := forecast.Fit(s.Slice(0, s.Index(now)), opts)
		if err != nil {
			continue
		}
		if t, ok := m.Predict(now, now.Add(within)).Crossing(l.Quota); ok && t.Before(now.Add(within)) {
			l.Alerted = now
			break
		}
	}
	return l
}
