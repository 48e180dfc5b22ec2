package console

import (
	"time"
	"unicode/utf8"
)

// expiry is how a pod's identity certificate stands, for the detail view.
type expiry struct {
	// Text says when it expires, relative to the clock.
	Text string
	// Class is cert-ok, cert-warn (under a third of its lifetime left: the
	// sidecar renews at two thirds, so a renewal is overdue) or
	// cert-expired; empty when the issuer recorded nothing.
	Class string
}

// expiryOf is the expiry of a certificate valid from..to at now.
func expiryOf(now, from, to time.Time) expiry {
	switch {
	case to.IsZero():
		return expiry{Text: "not recorded"}
	case !now.Before(to):
		return expiry{Text: "expired " + span(now.Sub(to)) + " ago", Class: "cert-expired"}
	}
	e := expiry{Text: "expires in " + span(to.Sub(now)), Class: "cert-ok"}
	if from.IsZero() || to.Sub(now)*3 < to.Sub(from) {
		// Without its start the lifetime is unknown: warn rather than
		// reassure.
		e.Class, e.Text = "cert-warn", e.Text+" (renewal overdue)"
	}
	return e
}

// clipAt is how much of an event message the workloads list shows; the
// whole message is the cell's title and on the detail view.
const clipAt = 80

// clip shortens s to clipAt characters, ending with an ellipsis.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= clipAt {
		return s
	}
	r := []rune(s)
	return string(r[:clipAt-1]) + "…"
}
