package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"time"
)

//go:embed web
var webFS embed.FS

// Console is the web console's HTTP handler.
type Console struct {
	cfg          Config
	pages        map[string]*template.Template
	handler      http.Handler
	rolloutWatch rolloutWatch
}

// New builds the console.
func New(cfg Config) (*Console, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, pages: map[string]*template.Template{}}
	c.rolloutWatch.c = c
	funcs := template.FuncMap{
		"age":    func(t time.Time) string { return age(cfg.Clock.Now(), t) },
		"clip":   clip,
		"expiry": func(from, to time.Time) expiry { return expiryOf(cfg.Clock.Now(), from, to) },
		"base":   func() string { return cfg.BasePath },
	}
	for _, p := range []string{"workloads", "workload", "submit", "capacity", "rollouts", "signin", "signedin", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(webFS, "web/layout.html", "web/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("failed to parse the %s page: %w", p, err)
		}
		c.pages[p] = t
	}
	static, err := fs.Sub(webFS, "web/static")
	if err != nil {
		return nil, fmt.Errorf("failed to open the embedded static files: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, c.cfg.BasePath+"/workloads", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /signin", c.signin)
	mux.HandleFunc("GET /callback", c.callback)
	mux.HandleFunc("POST /signout", c.signedIn(c.signout))
	mux.HandleFunc("GET /workloads", c.signedIn(c.workloads))
	mux.HandleFunc("GET /workloads/{kind}/{name}", c.signedIn(c.workload))
	mux.HandleFunc("GET /watch", c.signedIn(c.watch))
	mux.HandleFunc("GET /submit", c.signedIn(c.submitForm))
	mux.HandleFunc("POST /submit", c.signedIn(c.submit))
	mux.HandleFunc("GET /capacity", c.signedIn(c.capacity))
	mux.HandleFunc("GET /capacity/plot.svg", c.signedIn(c.plot))
	mux.HandleFunc("GET /rollouts", c.signedIn(c.rollouts))
	mux.HandleFunc("GET /rollouts/watch", c.signedIn(c.rolloutsWatch))
	mux.HandleFunc("POST /rollouts/confirm", c.signedIn(c.confirm))
	mux.HandleFunc("POST /rollouts/control", c.signedIn(c.act))
	c.handler = headers(mux)
	return c, nil
}

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// signedIn runs h for a signed-in person, checking the CSRF token of every
// form; anyone else is sent to sign in.
func (c *Console) signedIn(h func(http.ResponseWriter, *http.Request, *Session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.session(r)
		if errors.Is(err, errNoSession) {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, c.cfg.BasePath+"/signin?next="+url.QueryEscape(c.cfg.BasePath+r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.render(w, http.StatusUnauthorized, "error", page{Title: "Not signed in", Message: err.Error()})
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 2<<20)
			if !csrfOK(r, s) {
				c.render(w, http.StatusForbidden, "error", page{Session: s, Title: "Refused", Message: "the form's CSRF token is missing or wrong: reload the page and try again"})
				return
			}
		}
		h(w, r, s)
	}
}

// page is what every template gets.
type page struct {
	Session   *Session
	Title     string
	Nav       string
	Namespace string
	Message   string
	// Refresh, when set, is where the page sends the browser on load.
	Refresh string
	Data    any
}

func (c *Console) render(w http.ResponseWriter, code int, name string, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_ = c.pages[name].Execute(w, p)
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return span(now.Sub(t))
}

// span is a duration as the pages write it: 42s, 5m, 3h, 2d.
func span(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}
