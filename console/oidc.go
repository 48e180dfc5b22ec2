package console

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDC signs people in with an OpenID Connect provider (authorization
// code flow). The claims map to a user name and groups exactly as the
// apiserver's --oidc-username-claim/--oidc-username-prefix and
// --oidc-groups-claim/--oidc-groups-prefix map them, so that RBAC written
// for kubectl users holds in the console too.
type OIDC struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is the console's /callback as the browser reaches it.
	RedirectURL string
	// UsernameClaim default "email"; UsernamePrefix default "oidc:".
	UsernameClaim, UsernamePrefix string
	// GroupsClaim default "groups"; GroupsPrefix default "oidc:".
	GroupsClaim, GroupsPrefix string
	// HTTPClient reaches the issuer (its CA); default http.DefaultClient.
	HTTPClient *http.Client

	mu       sync.Mutex
	provider *oidc.Provider
}

// setup discovers the issuer once it answers; a failed discovery is
// retried at the next sign-in, so a provider that starts after the
// gateway is picked up.
func (o *OIDC) setup(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider != nil {
		return nil
	}
	{
		if o.UsernameClaim == "" {
			o.UsernameClaim = "email"
		}
		if o.UsernamePrefix == "" {
			o.UsernamePrefix = "oidc:"
		}
		if o.GroupsClaim == "" {
			o.GroupsClaim = "groups"
		}
		if o.GroupsPrefix == "" {
			o.GroupsPrefix = "oidc:"
		}
		p, err := oidc.NewProvider(o.ctx(ctx), o.Issuer)
		if err != nil {
			return fmt.Errorf("failed to discover the OIDC issuer %s: %w", o.Issuer, err)
		}
		o.provider = p
	}
	return nil
}

func (o *OIDC) ctx(ctx context.Context) context.Context {
	if o.HTTPClient != nil {
		return oidc.ClientContext(ctx, o.HTTPClient)
	}
	return ctx
}

func (o *OIDC) oauth2() *oauth2.Config {
	return &oauth2.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, RedirectURL: o.RedirectURL,
		Endpoint: o.provider.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "email", "profile", "groups"}}
}

// signinState is kept in a short-lived signed cookie across the redirect.
type signinState struct {
	State, Nonce, Next string
	Expires            time.Time
}

func random() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	next := r.FormValue("next")
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		next = c.cfg.BasePath + "/workloads"
	}
	o := c.cfg.OIDC
	if o == nil {
		c.render(w, http.StatusOK, "signin", page{Title: "Sign in", Message: "no OIDC issuer is configured"})
		return
	}
	if err := o.setup(r.Context()); err != nil {
		c.render(w, http.StatusBadGateway, "error", page{Title: "Sign-in unavailable", Message: err.Error()})
		return
	}
	st := signinState{State: random(), Nonce: random(), Next: next, Expires: c.cfg.Clock.Now().Add(10 * time.Minute)}
	v, err := c.sign(st)
	if err != nil {
		c.render(w, http.StatusInternalServerError, "error", page{Title: "Error", Message: err.Error()})
		return
	}
	// Lax: the provider's redirect back is a cross-site navigation.
	c.setCookie(w, cookieState, v, 10*time.Minute, http.SameSiteLaxMode)
	http.Redirect(w, r, o.oauth2().AuthCodeURL(st.State, oidc.Nonce(st.Nonce)), http.StatusSeeOther)
}

func (c *Console) callback(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, msg string) {
		c.render(w, code, "error", page{Title: "Sign-in failed", Message: msg})
	}
	o := c.cfg.OIDC
	if o == nil || o.setup(r.Context()) != nil {
		fail(http.StatusBadGateway, "no OIDC issuer is available")
		return
	}
	ck, err := r.Cookie(cookieState)
	st := signinState{}
	if err != nil || c.verify(ck.Value, &st) != nil || !c.cfg.Clock.Now().Before(st.Expires) {
		fail(http.StatusBadRequest, "the sign-in took too long or did not start here: sign in again")
		return
	}
	if r.FormValue("state") != st.State {
		fail(http.StatusBadRequest, "the sign-in state does not match: sign in again")
		return
	}
	if e := r.FormValue("error"); e != "" {
		fail(http.StatusUnauthorized, "the identity provider refused: "+e)
		return
	}
	ctx := o.ctx(r.Context())
	tok, err := o.oauth2().Exchange(ctx, r.FormValue("code"))
	if err != nil {
		fail(http.StatusBadGateway, fmt.Sprintf("failed to exchange the code: %v", err))
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := o.provider.VerifierContext(ctx, &oidc.Config{ClientID: o.ClientID, Now: c.cfg.Clock.Now}).Verify(ctx, raw)
	if err != nil {
		fail(http.StatusUnauthorized, fmt.Sprintf("the ID token does not verify: %v", err))
		return
	}
	if idt.Nonce != st.Nonce {
		fail(http.StatusUnauthorized, "the ID token's nonce does not match")
		return
	}
	user, groups, err := o.claims(idt)
	if err != nil {
		fail(http.StatusUnauthorized, err.Error())
		return
	}
	c.setCookie(w, cookieState, "", -time.Second, http.SameSiteLaxMode)
	sess, err := c.NewSession(w, user, groups)
	if err != nil {
		fail(http.StatusInternalServerError, err.Error())
		return
	}
	// Not a redirect: the session cookie is SameSite=Strict, and a
	// browser does not send it on a redirect chain that began at the
	// provider (cross-site). A refresh from this page is same-site.
	c.render(w, http.StatusOK, "signedin", page{Session: sess, Title: "Signed in", Refresh: st.Next})
}

// claims maps an ID token to the user name and groups.
func (o *OIDC) claims(idt *oidc.IDToken) (string, []string, error) {
	m := map[string]any{}
	if err := idt.Claims(&m); err != nil {
		return "", nil, fmt.Errorf("failed to read the ID token's claims: %w", err)
	}
	if v, ok := m["email_verified"].(bool); o.UsernameClaim == "email" && ok && !v {
		return "", nil, fmt.Errorf("the email %v is not verified", m["email"])
	}
	u, _ := m[o.UsernameClaim].(string)
	if u == "" {
		return "", nil, fmt.Errorf("the ID token has no %s claim", o.UsernameClaim)
	}
	var groups []string
	if gs, ok := m[o.GroupsClaim].([]any); ok {
		for _, g := range gs {
			if s, ok := g.(string); ok {
				groups = append(groups, o.GroupsPrefix+s)
			}
		}
	}
	return o.UsernamePrefix + u, groups, nil
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request, _ *Session) {
	c.setCookie(w, c.cookieName(), "", -time.Second, http.SameSiteStrictMode)
	// A page, not a redirect to the provider: the CSP's form-action
	// 'self' covers a form's redirects, and a person who signs out wants
	// to stay out.
	c.render(w, http.StatusOK, "signin", page{Title: "Signed out", Message: "You are signed out.", Data: c.cfg.BasePath + "/signin"})
}
