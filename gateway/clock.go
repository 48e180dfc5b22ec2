package gateway

import "time"

// Clock is the time source; tests inject one.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
