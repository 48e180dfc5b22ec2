package console

import (
	"errors"
	"net/http"
	"time"
)

// Clock is the time source (injected in tests).
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Config is the console's configuration; New applies the defaults.
type Config struct {
	// API is the gateway's HTTP API (gateway.Gateway.Handler). Required.
	API http.Handler
	// SessionKey signs session cookies (HMAC-SHA256, at least 32 bytes).
	// Required; rotate it to sign everybody out.
	SessionKey []byte
	// SessionTTL is how long a sign-in lasts. Default 8h.
	SessionTTL time.Duration
	// OIDC signs people in. Nil leaves only sessions minted by the
	// embedding program (tests).
	OIDC *OIDC
	// DefaultNamespace is shown when a page names none. Default "default".
	DefaultNamespace string
	// Insecure drops the Secure flag from cookies: plain-HTTP loopback
	// development only. Default false.
	Insecure bool
	Clock    Clock
}

func (c *Config) defaults() error {
	if c.API == nil {
		return errors.New("console: Config.API is required")
	}
	if len(c.SessionKey) < 32 {
		return errors.New("console: Config.SessionKey must be at least 32 bytes")
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = 8 * time.Hour
	}
	if c.DefaultNamespace == "" {
		c.DefaultNamespace = "default"
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	return nil
}
