// Package certs is the certificate sidecar: it generates the pod's private
// key inside the pod, has the node agent sign a CSR for it, writes key,
// chain and trust bundle atomically to an in-memory volume the app
// containers mount, and renews at two thirds of the lifetime, retrying with
// jittered backoff while the agent or issuer is down. Source serves the
// files to Go TLS code.
package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/certsapi"
	"github.com/trellis-dev/trellis/internal/pki"
)

// Config configures a Sidecar.
type Config struct {
	// Socket is the node agent's Unix socket.
	Socket string
	// Dir receives key.pem, cert.pem and bundle.pem.
	Dir string
	// BundleRefresh is how often the trust bundle is refetched between
	// renewals, so a CA rotation reaches pods quickly (default 1m).
	BundleRefresh time.Duration
	// Backoff between failed attempts (default 200ms doubling to 30s,
	// jitter 0.5).
	Backoff wait.Backoff
	Logger  *slog.Logger
	// Clock schedules renewals, bundle refreshes and retries (default the
	// real clock; tests step a fake one).
	Clock clock.Clock
}

// Sidecar keeps a pod's identity current.
type Sidecar struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client
	// notAfter of the certificate written last.
	notAfter time.Time
	bundle   []byte
}

// New returns a sidecar.
func New(cfg Config) *Sidecar {
	if cfg.BundleRefresh == 0 {
		cfg.BundleRefresh = time.Minute
	}
	if cfg.Backoff.Duration == 0 {
		cfg.Backoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: 30 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	socket := cfg.Socket
	return &Sidecar{cfg: cfg, log: cfg.Logger, client: &http.Client{
		Timeout: 15 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}, DisableKeepAlives: true},
	}}
}

// Once obtains and writes an identity, retrying until it succeeds or ctx
// ends (the init-container mode).
func (s *Sidecar) Once(ctx context.Context) error {
	b := s.cfg.Backoff
	for {
		err := s.renew(ctx)
		if err == nil {
			return nil
		}
		s.log.Warn("failed to obtain a certificate; retrying", "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("no certificate obtained: %w (last error: %w)", ctx.Err(), err)
		case <-s.cfg.Clock.After(b.Step()):
		}
	}
}

// Run keeps the identity current until ctx ends: renew at two thirds of
// the remaining lifetime, refresh the bundle in between, back off on errors
// (the current certificate stays in place while it is valid).
func (s *Sidecar) Run(ctx context.Context) error {
	if err := s.Once(ctx); err != nil {
		return err
	}
	b := s.cfg.Backoff
	next := s.renewAt()
	for {
		wait := min(next.Sub(s.cfg.Clock.Now()), s.cfg.BundleRefresh)
		select {
		case <-ctx.Done():
			return nil
		case <-s.cfg.Clock.After(max(wait, 0)):
		}
		if !s.cfg.Clock.Now().Before(next) {
			if err := s.renew(ctx); err != nil {
				// Back off, but never so long that the certificate expires
				// before the next attempt: at most a third of what is left.
				d := b.Step()
				if left := s.notAfter.Sub(s.cfg.Clock.Now()); d > left/3 {
					d = max(left/3, 100*time.Millisecond)
				}
				s.log.Warn("renewal failed; keeping the current certificate and retrying", "err", err, "retryIn", d, "notAfter", s.notAfter)
				next = s.cfg.Clock.Now().Add(d)
				continue
			}
			b = s.cfg.Backoff
			next = s.renewAt()
			continue
		}
		if err := s.refreshBundle(ctx); err != nil {
			s.log.Debug("bundle refresh failed", "err", err)
		}
	}
}

// renewAt is two thirds of the way from now to the certificate's expiry.
// Computed on our clock from the time left, so a skewed clock shifts the
// schedule, not the margin.
func (s *Sidecar) renewAt() time.Time {
	now := s.cfg.Clock.Now()
	return now.Add(s.notAfter.Sub(now) * 2 / 3)
}

func (s *Sidecar) renew(ctx context.Context) error {
	key, err := pki.NewKey()
	if err != nil {
		return err
	}
	csr, err := pki.NewCSR(key)
	if err != nil {
		return err
	}
	body, err := s.call(ctx, http.MethodPost, certsapi.SignPath, pki.EncodeCSR(csr))
	if err != nil {
		return err
	}
	var resp certsapi.SignResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("bad answer from the agent: %w", err)
	}
	chain, err := pki.ParseCerts(resp.Chain)
	if err != nil {
		return fmt.Errorf("bad chain from the agent: %w", err)
	}
	if !publicKeyMatches(chain[0], key) {
		return errors.New("the agent returned a certificate for another key")
	}
	if _, err := pki.ParseCerts(resp.Bundle); err != nil {
		return fmt.Errorf("bad bundle from the agent: %w", err)
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return err
	}
	if err := WriteAtomic(s.cfg.Dir, map[string][]byte{wellknown.IdentityKeyFile: keyPEM, wellknown.IdentityCertFile: resp.Chain, wellknown.IdentityBundleFile: resp.Bundle},
		map[string]os.FileMode{wellknown.IdentityKeyFile: 0o600}); err != nil {
		return err
	}
	s.notAfter, s.bundle = chain[0].NotAfter, resp.Bundle
	s.log.Info("identity written", "id", resp.SPIFFEID, "notAfter", s.notAfter)
	return nil
}

func (s *Sidecar) refreshBundle(ctx context.Context) error {
	b, err := s.call(ctx, http.MethodGet, certsapi.BundlePath, nil)
	if err != nil {
		return err
	}
	if bytes.Equal(b, s.bundle) {
		return nil
	}
	if _, err := pki.ParseCerts(b); err != nil {
		return err
	}
	cur, err := loadFrom(s.cfg.Dir + "/" + dataLink)
	if err != nil {
		return err
	}
	keyPEM, err := pki.EncodeKey(cur.Key)
	if err != nil {
		return err
	}
	if err := WriteAtomic(s.cfg.Dir, map[string][]byte{wellknown.IdentityKeyFile: keyPEM, wellknown.IdentityCertFile: pki.EncodeCerts(cur.Chain...), wellknown.IdentityBundleFile: b},
		map[string]os.FileMode{wellknown.IdentityKeyFile: 0o600}); err != nil {
		return err
	}
	s.bundle = b
	s.log.Info("trust bundle updated", "roots", bytes.Count(b, []byte("BEGIN CERTIFICATE")))
	return nil
}

func (s *Sidecar) call(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://agent"+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("failed to make the agent request %s %s: %w", method, path, err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent unreachable: %w", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("failed to read the agent's answer to %s %s: %w", method, path, err)
	}

	if resp.StatusCode != http.StatusOK {
		var e certsapi.Error
		_ = json.Unmarshal(out, &e)
		return nil, &RefusedError{Code: resp.StatusCode, Message: e.Error}
	}
	return out, nil
}

// RefusedError is an agent's refusal.
type RefusedError struct {
	Code    int
	Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("agent refused (%d): %s", e.Code, e.Message)
}

func publicKeyMatches(c *x509.Certificate, k *ecdsa.PrivateKey) bool {
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	return ok && pub.Equal(&k.PublicKey)
}
