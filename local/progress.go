package local

import (
	"fmt"
	"io"
	"time"
)

// Progress prints a step's start and end for a person watching, in kind's
// style: " • node image ..." when it starts, then " ✓ node image (6m12s)"
// or " ✗ node image (3s)" with its wall time. A nil *Progress prints
// nothing.
type Progress struct {
	w io.Writer
}

// NewProgress returns a Progress writing to w, or nil (silent) when w is
// nil.
func NewProgress(w io.Writer) *Progress {
	if w == nil {
		return nil
	}
	return &Progress{w: w}
}

// Start says that the named step has begun.
func (p *Progress) Start(name string) {
	if p == nil {
		return
	}
	fmt.Fprintf(p.w, " • %s ...\n", name)
}

// End says that the named step has ended after took, failed when err is
// not nil.
func (p *Progress) End(name string, took time.Duration, err error) {
	if p == nil {
		return
	}
	mark := "✓"
	if err != nil {
		mark = "✗"
	}
	fmt.Fprintf(p.w, " %s %s (%s)\n", mark, name, Elapsed(took))
}

// Elapsed formats a step's wall time for Progress: whole seconds, with
// minutes and hours when they are not zero ("42s", "6m12s", "1h2m0s"),
// and "<1s" under a second.
func Elapsed(d time.Duration) string {
	if d < time.Second {
		return "<1s"
	}
	return d.Truncate(time.Second).String()
}
