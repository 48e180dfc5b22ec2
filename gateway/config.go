package gateway

import (
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"k8s.io/client-go/rest"
)

// Config is trellis-gateway's configuration; zero values take defaults in
// New. A full example with every field is docs/user/gateway.md.
type Config struct {
	// Rest is the gateway's own client configuration (its ServiceAccount).
	Rest *rest.Config
	// Fleet, when set, is the fleet's (Karmada's) apiserver: a submission
	// that carries a Placement goes there instead of to this cluster,
	// through the same checks (trellis-gateway --fleet).
	Fleet *rest.Config
	// Namespace holds the policy and trust bundle ConfigMaps and the
	// runtime profile (default trellis-system).
	Namespace string
	// Addr is the HTTPS listen address (default :8443), unless Listener.
	Addr     string
	Listener net.Listener
	// TLSCertFile and TLSKeyFile are the serving certificate (re-read when
	// they change, for rotation).
	TLSCertFile, TLSKeyFile string
	// ClientCAFile, when set, holds the roots client certificates must
	// chain to; by default the issuer's trust bundle ConfigMap
	// (trellis-trust-bundle) in Namespace.
	ClientCAFile string
	// TrustDomain of client SPIFFE IDs (default trellis.local).
	TrustDomain string
	// Audiences a bearer token must be for (default trellis-gateway).
	Audiences []string
	// TokenCacheTTL keeps successful token reviews (default 10s);
	// AllowTTL and DenyTTL keep authorization decisions (default 10s, 5s);
	// AuthCacheSize bounds each cache (default 4096 entries).
	TokenCacheTTL, AllowTTL, DenyTTL time.Duration
	AuthCacheSize                    int
	// RatePerSecond and RateBurst limit each identity's submissions
	// (default 5/s, burst 20); RateIdentities bounds the buckets kept
	// (default 10000).
	RatePerSecond  float64
	RateBurst      int
	RateIdentities int
	// ReadYourWrites bounds how long a write waits for the cache to hold
	// it (default 5s).
	ReadYourWrites time.Duration
	// DaemonNamespaces may run TrellisDaemons (default the controller's).
	DaemonNamespaces []string
	// Audit receives one JSON line per decision (default stdout).
	Audit io.Writer
	Log   *slog.Logger
	Clock Clock
}

func (c *Config) defaults() {
	if c.Namespace == "" {
		c.Namespace = "trellis-system"
	}
	if c.Addr == "" {
		c.Addr = ":8443"
	}
	if c.TrustDomain == "" {
		c.TrustDomain = "trellis.local"
	}
	if len(c.Audiences) == 0 {
		c.Audiences = []string{"trellis-gateway"}
	}
	if c.TokenCacheTTL == 0 {
		c.TokenCacheTTL = 10 * time.Second
	}
	if c.AllowTTL == 0 {
		c.AllowTTL = 10 * time.Second
	}
	if c.DenyTTL == 0 {
		c.DenyTTL = 5 * time.Second
	}
	if c.AuthCacheSize == 0 {
		c.AuthCacheSize = 4096
	}
	if c.RatePerSecond == 0 {
		c.RatePerSecond = 5
	}
	if c.RateBurst == 0 {
		c.RateBurst = 20
	}
	if c.RateIdentities == 0 {
		c.RateIdentities = 10000
	}
	if c.ReadYourWrites == 0 {
		c.ReadYourWrites = 5 * time.Second
	}
	if c.Audit == nil {
		c.Audit = os.Stdout
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
}
