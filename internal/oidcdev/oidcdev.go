// Package oidcdev is a small OpenID Connect provider for the local cluster
// and tests: zitadel/oidc's op.Provider with its in-memory example storage,
// static users signing in with a password, and one web client (the
// console). It is a development provider: keys live in memory and are
// new at every start.
package oidcdev

import (
	"context"
	"crypto/sha256"
	"fmt"
	"html/template"
	"net/http"
	"net/url"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// User is a static user; ID is the token's sub claim (the console and the
// apiserver map it to the Kubernetes user oidc:<ID>).
type User struct {
	ID       string `json:"id"`
	Password string `json:"password"`
	Email    string `json:"email,omitempty"`
}

// Config is the provider's configuration.
type Config struct {
	// Issuer is the provider's URL as clients reach it (http on loopback
	// is allowed).
	Issuer string `json:"issuer"`
	// ClientID, ClientSecret and RedirectURIs describe the one web client.
	ClientID     string   `json:"clientID"`
	ClientSecret string   `json:"clientSecret"`
	RedirectURIs []string `json:"redirectURIs"`
	Users        []User   `json:"users"`
}

type users map[string]*storage.User

func (u users) GetUserByID(id string) *storage.User { return u[id] }
func (u users) GetUserByUsername(name string) *storage.User {
	return u[name]
}
func (users) ExampleClientID() string { return "service" }

var _ storage.UserStore = users(nil)

// assertingStorage hands out the client with its userinfo claims (email,
// profile) asserted in the ID token, which the console maps to a user.
type assertingStorage struct{ *storage.Storage }

func (s assertingStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return assertingClient{c}, nil
}

type assertingClient struct{ op.Client }

func (assertingClient) IDTokenUserinfoClaimsAssertion() bool { return true }

// New returns the provider's HTTP handler (discovery, keys, authorize,
// token, userinfo, and the /login/username password form).
func New(cfg Config) (http.Handler, error) {
	us := users{}
	for _, u := range cfg.Users {
		us[u.ID] = &storage.User{ID: u.ID, Username: u.ID, Password: u.Password, Email: u.Email, EmailVerified: u.Email != "", PreferredLanguage: language.English}
	}
	client := storage.WebClient(cfg.ClientID, cfg.ClientSecret, cfg.RedirectURIs...)
	st := storage.NewStorageWithClients(us, map[string]*storage.Client{cfg.ClientID: client})
	key := sha256.Sum256([]byte(cfg.ClientSecret + cfg.Issuer))
	provider, err := op.NewProvider(&op.Config{
		CryptoKey: key, CodeMethodS256: true, AuthMethodPost: true,
		SupportedUILocales: []language.Tag{language.English},
	}, assertingStorage{st}, op.StaticIssuer(cfg.Issuer), op.WithAllowInsecure())
	if err != nil {
		return nil, fmt.Errorf("failed to create the OIDC provider: %w", err)
	}
	mux := http.NewServeMux()
	callback := op.AuthCallbackURL(provider)
	// The login form's answer redirects to the client: CSP form-action
	// covers redirects, so it names the redirect URIs' origins.
	formAction := "'self'"
	for _, u := range cfg.RedirectURIs {
		if p, err := url.Parse(u); err == nil {
			formAction += " " + p.Scheme + "://" + p.Host
		}
	}
	mux.HandleFunc("GET /login/username", func(w http.ResponseWriter, r *http.Request) {
		renderLogin(w, formAction, r.FormValue("authRequestID"), "")
	})
	mux.Handle("POST /login/username", op.NewIssuerInterceptor(provider.IssuerFromRequest).HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.FormValue("id")
		if err := st.CheckUsernamePassword(r.FormValue("username"), r.FormValue("password"), id); err != nil {
			renderLogin(w, formAction, id, "wrong user name or password")
			return
		}
		http.Redirect(w, r, callback(r.Context(), id), http.StatusFound)
	}))
	mux.Handle("/", provider)
	return mux, nil
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Sign in · trellis-oidc-dev</title></head>
<body><main><h1>Sign in</h1>
{{if .Error}}<p role="alert">{{.Error}}</p>{{end}}
<form method="post" action="/login/username">
<input type="hidden" name="id" value="{{.ID}}">
<p><label for="username">User</label> <input id="username" name="username" autocomplete="username" required></p>
<p><label for="password">Password</label> <input id="password" name="password" type="password" autocomplete="current-password" required></p>
<p><button type="submit">Sign in</button></p>
</form></main></body></html>`))

func renderLogin(w http.ResponseWriter, formAction, id, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; form-action "+formAction+"; frame-ancestors 'none'")
	_ = loginPage.Execute(w, struct{ ID, Error string }{id, msg})
}
