package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// CookieSession is the session cookie's name. The __Host- prefix makes
// the browser refuse it unless it is Secure, host-only and Path=/.
const (
	CookieSession         = "__Host-trellis-session"
	cookieSessionInsecure = "trellis-session"
	cookieState           = "trellis-oidc-state"
)

// Session is a signed-in person as the cluster's RBAC knows them.
type Session struct {
	User    string    `json:"u"`
	Groups  []string  `json:"g,omitempty"`
	CSRF    string    `json:"c"`
	Expires time.Time `json:"e"`
}

var errNoSession = errors.New("not signed in")

func (c *Console) cookieName() string {
	if c.cfg.Insecure {
		return cookieSessionInsecure
	}
	return CookieSession
}

// sign returns payload.mac, both base64url.
func (c *Console) sign(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("failed to encode the session: %w", err)
	}
	m := hmac.New(sha256.New, c.cfg.SessionKey)
	m.Write(b)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

func (c *Console) verify(s string, v any) error {
	p, mac, ok := strings.Cut(s, ".")
	if !ok {
		return errors.New("malformed cookie")
	}
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return fmt.Errorf("malformed cookie: %w", err)
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil {
		return fmt.Errorf("malformed cookie: %w", err)
	}
	m := hmac.New(sha256.New, c.cfg.SessionKey)
	m.Write(b)
	if !hmac.Equal(got, m.Sum(nil)) {
		return errors.New("cookie signature does not verify")
	}
	return json.Unmarshal(b, v)
}

// NewSession signs user (with groups) in on w: the cookie is Secure,
// HttpOnly and SameSite=Strict, and carries a fresh CSRF token.
func (c *Console) NewSession(w http.ResponseWriter, user string, groups []string) (*Session, error) {
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return nil, fmt.Errorf("failed to make a CSRF token: %w", err)
	}
	s := &Session{User: user, Groups: groups, CSRF: base64.RawURLEncoding.EncodeToString(tok), Expires: c.cfg.Clock.Now().Add(c.cfg.SessionTTL).UTC()}
	v, err := c.sign(s)
	if err != nil {
		return nil, err
	}
	c.setCookie(w, c.cookieName(), v, c.cfg.SessionTTL, http.SameSiteStrictMode)
	return s, nil
}

func (c *Console) setCookie(w http.ResponseWriter, name, value string, ttl time.Duration, same http.SameSite) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: int(ttl.Seconds()),
		Secure: !c.cfg.Insecure, HttpOnly: true, SameSite: same,
	})
}

// session returns the request's verified, unexpired session.
func (c *Console) session(r *http.Request) (*Session, error) {
	ck, err := r.Cookie(c.cookieName())
	if err != nil {
		return nil, errNoSession
	}
	s := &Session{}
	if err := c.verify(ck.Value, s); err != nil {
		return nil, fmt.Errorf("%w: %w", errNoSession, err)
	}
	if !c.cfg.Clock.Now().Before(s.Expires) {
		return nil, fmt.Errorf("%w: session expired at %s", errNoSession, s.Expires.Format(time.RFC3339))
	}
	return s, nil
}
