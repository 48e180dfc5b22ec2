package forecast

import (
	"errors"
	"fmt"
	"time"
)

const day = 24 * time.Hour

// Options tune a fit; zero fields take the defaults.
type Options struct {
	// Horizon is how far ahead to forecast (default 30 days).
	Horizon time.Duration
	// MinHistory is the history (after a namespace's first use and after
	// its last change point) below which Fit refuses (default 14 days).
	MinHistory time.Duration
	// Window is the most recent history the model looks at (default 8
	// weeks): older levels say little about next month.
	Window time.Duration
	// PlanStep is the length of one step of a quota schedule (default a
	// day: `quota watch` applies each step when it starts).
	PlanStep time.Duration
	// Risk is the probability that a week's usage rises above PeakBound
	// on some day of it, when the model's assumptions hold (default
	// 0.0003): low enough that a plan runs out no more often than the
	// reactive peak+20%, high enough that it holds less quota than that on
	// steady growth (the backtests: docs/design/forecast.md).
	Risk float64
	// Interval is the two-sided probability of the hourly band Lower..Upper
	// (default 0.95).
	Interval float64
	// SteadyHeadroom: a namespace whose fitted trend is no trend plans at
	// most its last 30 days' peak plus this share (default 0.2, the
	// reactive rule's; negative: no cap). For a steady series its own
	// recent peak already bounds the month ahead, and the bound of a week
	// of maxima read from a few weeks of history can be wider than that;
	// the forecast then only lowers the reactive plan.
	SteadyHeadroom float64
}

// DefaultOptions fills o's zero fields with the defaults.
func DefaultOptions(o Options) Options { return o.withDefaults() }

func (o Options) withDefaults() Options {
	if o.Horizon == 0 {
		o.Horizon = 30 * day
	}
	if o.MinHistory == 0 {
		o.MinHistory = 14 * day
	}
	if o.Window == 0 {
		o.Window = 56 * day
	}
	if o.PlanStep == 0 {
		o.PlanStep = day
	}
	if o.Risk == 0 {
		o.Risk = 0.0003
	}
	if o.Interval == 0 {
		o.Interval = 0.95
	}
	if o.SteadyHeadroom == 0 {
		o.SteadyHeadroom = 0.2
	}
	return o
}

// Validate refuses options no forecast can be made with (zero fields
// take their defaults).
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.Risk <= 0 || o.Risk >= 1:
		return fmt.Errorf("risk %g: want a probability between 0 and 1, both excluded", o.Risk)
	case o.Interval <= 0 || o.Interval >= 1:
		return fmt.Errorf("interval %g: want a probability between 0 and 1, both excluded", o.Interval)
	case o.Horizon < 0 || o.MinHistory < 0 || o.Window < 0 || o.PlanStep < 0:
		return fmt.Errorf("horizon %s, min history %s, window %s, plan step %s: want none negative", o.Horizon, o.MinHistory, o.Window, o.PlanStep)
	}
	return nil
}

// ShortHistoryError is Fit's refusal: the series holds too little usable
// history. Planners fall back to the peak-plus-headroom rule.
type ShortHistoryError struct {
	Have, Want time.Duration
}

func (e *ShortHistoryError) Error() string {
	return fmt.Sprintf("%s of history, want at least %s", e.Have.Round(time.Hour), e.Want.Round(time.Hour))
}

// IsShortHistory reports whether err is a ShortHistoryError.
func IsShortHistory(err error) bool {
	var s *ShortHistoryError
	return errors.As(err, &s)
}
