// Package traffic is the sidecar that runs beside an application and puts
// it in its ZooKeeper serverset while, and only while, it is healthy: it
// health-checks the app (HTTP or TCP) with rise/fall thresholds, registers
// after Rise consecutive successes, deregisters after Fall consecutive
// failures, and on shutdown deregisters first, then waits a drain period
// before exiting, so clients stop sending before the app stops.
package traffic

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/trellis-dev/trellis/internal/serverset"
)

// Check is one health check of the app.
type Check func(ctx context.Context) error

// HTTPCheck passes when GET url answers 2xx or 3xx.
func HTTPCheck(url string, timeout time.Duration) Check {
	client := &http.Client{Timeout: timeout}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("make the request to %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("send the request: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
}

// TCPCheck passes when addr accepts a connection.
func TCPCheck(addr string, timeout time.Duration) Check {
	return func(ctx context.Context) error {
		d := net.Dialer{Timeout: timeout}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		return conn.Close()
	}
}

// Registry is what the sidecar needs of a serverset registrar.
type Registry interface {
	Set(key string, reg serverset.Registration) error
	Remove(key string)
}

var _ Registry = (*serverset.Registrar)(nil)

// Config configures the sidecar; New applies defaults.
type Config struct {
	Check        Check
	Registry     Registry
	Key          string
	Registration serverset.Registration
	// Interval between checks (default 1s); Rise and Fall thresholds
	// (default 2 and 3); Drain after deregistering on shutdown (default 5s).
	Interval   time.Duration
	Rise, Fall int
	Drain      time.Duration
	// Deregistered, when set, is called once deregistration on shutdown has
	// been requested (tests observe the ordering).
	Deregistered func()
	Logger       *slog.Logger
}

// Sidecar is the traffic sidecar.
type Sidecar struct {
	cfg        Config
	registered bool
}

// New returns a Sidecar.
func New(cfg Config) (*Sidecar, error) {
	if cfg.Check == nil || cfg.Registry == nil || cfg.Key == "" {
		return nil, fmt.Errorf("traffic: Check, Registry and Key are required")
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.Rise == 0 {
		cfg.Rise = 2
	}
	if cfg.Fall == 0 {
		cfg.Fall = 3
	}
	if cfg.Drain == 0 {
		cfg.Drain = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sidecar{cfg: cfg}, nil
}

// Registered reports whether the app is currently registered.
func (s *Sidecar) Registered() bool { return s.registered }

// Run checks the app until ctx ends (SIGTERM), then deregisters, drains and
// returns.
func (s *Sidecar) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	ok, bad := 0, 0
	for {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.Interval)
		err := s.cfg.Check(cctx)
		cancel()
		if ctx.Err() != nil {
			break
		}
		if err == nil {
			ok, bad = ok+1, 0
		} else {
			ok, bad = 0, bad+1
		}
		switch {
		case !s.registered && ok >= s.cfg.Rise:
			if err := s.cfg.Registry.Set(s.cfg.Key, s.cfg.Registration); err != nil {
				return fmt.Errorf("failed to register: %w", err)
			}
			s.registered = true
			s.cfg.Logger.Info("app healthy: registered", "key", s.cfg.Key)
		case s.registered && bad >= s.cfg.Fall:
			s.cfg.Registry.Remove(s.cfg.Key)
			s.registered = false
			s.cfg.Logger.Warn("app unhealthy: deregistered", "key", s.cfg.Key, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-t.C:
			continue
		}
		break
	}
	// Shutdown: deregister first, then let in-flight traffic drain.
	s.cfg.Registry.Remove(s.cfg.Key)
	s.registered = false
	if s.cfg.Deregistered != nil {
		s.cfg.Deregistered()
	}
	s.cfg.Logger.Info("deregistered; draining", "drain", s.cfg.Drain)
	time.Sleep(s.cfg.Drain)
	return nil
}
