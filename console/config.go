package console

import (
	"errors"
	"net/http"
	"strings"
	"time"
)

// Clock is the time source (injected in tests).
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// MountPath is where the gateway serves the console.
const MountPath = "/console"

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
	// BasePath is where the console is mounted ("/console" in the
	// gateway); links and redirects start with it. Default "" (the root).
	BasePath string
	// Capacity gives the usage history the capacity page forecasts from;
	// nil shows quotas and usage without a forecast.
	Capacity HistorySource
	// Horizon is how far ahead the capacity page forecasts (default 30
	// days).
	Horizon time.Duration
	// Access asks SubjectAccessReview for what the gateway's API has no
	// route for (the rollouts page). Nil: the rollouts page refuses all.
	Access AccessReviewer
	// Rollouts is the AMI rollout's state store; nil: the rollouts page
	// says none is configured.
	Rollouts RolloutStore
	// RolloutPoll is how often the rollouts page's live update reads the
	// store, once for all open pages and only while one is (default 5s).
	RolloutPoll time.Duration
	Clock       Clock
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
	if c.BasePath == "/" || strings.HasSuffix(c.BasePath, "/") {
		return errors.New("console: Config.BasePath must be empty or not end in /")
	}
	if c.RolloutPoll <= 0 {
		c.RolloutPoll = 5 * time.Second
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	return nil
}
