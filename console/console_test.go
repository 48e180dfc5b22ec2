package console_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/console"
	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/gateway/api"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

var now = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// fakeAPI stands in for the gateway's handler in these unit tests (the
// integration test uses the real one on a real apiserver). It allows
// oidc:alice in team-a, lets oidc:erin list its workloads but not their
// events, and refuses everybody else, as RBAC would.
type fakeAPI struct{ calls atomic.Int32 }

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	id, err := (&gateway.Authenticator{}).Authenticate(r)
	w.Header().Set("Content-Type", "application/json")
	if err == nil && id.User == "oidc:erin" && r.URL.Path == "/v1/namespaces/team-a/workloads" {
		_ = json.NewEncoder(w).Encode(api.WorkloadList{Items: workloadItems(false), EventsHidden: "forbidden: oidc:erin may not list events in namespace team-a"})
		return
	}
	if err != nil || id.User != "oidc:alice" || (r.Method == http.MethodGet && !strings.Contains(r.URL.Path, "/team-a/")) {
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(api.Error{Reason: "Forbidden", Message: "oidc:bob may not list workloads in team-a"})
		return
	}
	if strings.HasSuffix(r.URL.Path, "/status") {
		_ = json.NewEncoder(w).Encode(detailStatus)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/quotas") {
		_ = json.NewEncoder(w).Encode(api.QuotaList{Items: []api.Quota{{Name: "compute",
			Hard: map[string]string{"requests.cpu": "6", "pods": "40"}, Used: map[string]string{"requests.cpu": "4", "pods": "12"}}}})
		return
	}
	if r.Method == http.MethodPost {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(api.Error{Reason: "Invalid", Message: "the workload was refused: 2 problems", Problems: []api.Problem{
			{Check: "provenance", Field: "spec.template.containers[0].image", Message: "image docker.io/nginx is not from an allowed registry"},
			{Check: "validation", Field: "spec.replicas", Message: "must be at least 1"},
		}})
		return
	}
	_ = json.NewEncoder(w).Encode(api.WorkloadList{Items: workloadItems(true)})
}

// workloadItems is team-a's workloads, with their last events if events.
func workloadItems(events bool) []api.Workload {
	items := []api.Workload{
		{Kind: "Service", Namespace: "team-a", Name: "web", Ready: "True", Image: "registry.example/web:1.4, registry.example/log-agent:2", Created: now.Add(-3 * time.Hour)},
		{Kind: "Batch", Namespace: "team-a", Name: "nightly", Ready: "False", Reason: "PodsPending", Created: now.Add(-90 * time.Second)},
	}
	if events {
		items[1].LastEvent = &api.Event{Time: now.Add(-40 * time.Second), Type: "Warning", Reason: "FailedScheduling", Count: 3,
			Message: "0/6 nodes are available: 3 Insufficient cpu, 3 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"}
	}
	return items
}

func newConsole(t *testing.T) (*console.Console, *fakeAPI) {
	t.Helper()
	f := &fakeAPI{}
	c, err := console.New(console.Config{API: f, SessionKey: []byte(strings.Repeat("k", 32)), Clock: fixedClock{now}})
	if err != nil {
		t.Fatal(err)
	}
	return c, f
}

// signIn mints a session for user and returns its cookie and CSRF token.
func signIn(t *testing.T, c *console.Console, user string) (*http.Cookie, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	s, err := c.NewSession(rec, user, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Result().Cookies()[0], s.CSRF
}

// reply is a recorded answer (a recorder's body needs no closing).
type reply struct {
	StatusCode int
	Header     http.Header
	Body       string
}

func do(c http.Handler, method, target string, ck *http.Cookie, form url.Values) reply {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, target, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if ck != nil {
		r.AddCookie(ck)
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return reply{StatusCode: w.Code, Header: w.Header(), Body: w.Body.String()}
}

func TestSessionCookieFlags(t *testing.T) {
	c, _ := newConsole(t)
	ck, _ := signIn(t, c, "oidc:alice")
	if ck.Name != console.CookieSession || !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Domain != "" {
		t.Fatalf("session cookie %+v: want __Host- name, Secure, HttpOnly, SameSite=Strict, Path=/, no Domain", ck)
	}
}

func TestEveryAnswerHasStrictCSP(t *testing.T) {
	c, _ := newConsole(t)
	ck, _ := signIn(t, c, "oidc:alice")
	for _, target := range []string{"/workloads?namespace=team-a", "/submit", "/signin", "/static/console.js", "/nope"} {
		resp := do(c, http.MethodGet, target, ck, nil)
		if got := resp.Header.Get("Content-Security-Policy"); got != console.CSP {
			t.Errorf("%s: CSP %q, want %q", target, got, console.CSP)
		}
		body := resp.Body
		if regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]|<script>|\son[a-z]+=|\sstyle=`).MatchString(body) {
			t.Errorf("%s: inline script, handler or style in the page", target)
		}
	}
	for _, want := range []string{"default-src 'self'", "frame-ancestors 'none'", "script-src 'self'"} {
		if !strings.Contains(console.CSP, want) {
			t.Errorf("CSP lacks %s", want)
		}
	}
}

func TestFormWithoutCSRFTokenIsRefused(t *testing.T) {
	c, f := newConsole(t)
	ck, tok := signIn(t, c, "oidc:alice")
	for name, form := range map[string]url.Values{
		"missing": {"workload": {"kind: Service"}},
		"wrong":   {"workload": {"kind: Service"}, "csrf": {tok + "x"}},
	} {
		resp := do(c, http.MethodPost, "/submit", ck, form)
		body := resp.Body
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Errorf("%s token: %d, want 403 naming CSRF", name, resp.StatusCode)
		}
	}
	// Another session's token is wrong too.
	_, other := signIn(t, c, "oidc:alice")
	resp := do(c, http.MethodPost, "/submit", ck, url.Values{"csrf": {other}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("another session's token: %d, want 403", resp.StatusCode)
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("the gateway was called %d times for refused forms", n)
	}
	if resp := do(c, http.MethodPost, "/submit", ck, url.Values{"csrf": {tok}, "workload": {"x"}}); resp.StatusCode == http.StatusForbidden {
		t.Fatalf("the right token was refused")
	}
}

func TestNoSessionOrBadSessionSignsIn(t *testing.T) {
	c, f := newConsole(t)
	ck, _ := signIn(t, c, "oidc:alice")
	tampered := *ck
	tampered.Value = strings.Replace(ck.Value, ck.Value[:4], "eyJ1", 1) + "A"
	late, _ := console.New(console.Config{API: f, SessionKey: []byte(strings.Repeat("k", 32)), Clock: fixedClock{now.Add(9 * time.Hour)}})
	for name, tc := range map[string]struct {
		h  http.Handler
		ck *http.Cookie
	}{"none": {c, nil}, "tampered": {c, &tampered}, "expired": {late, ck}} {
		resp := do(tc.h, http.MethodGet, "/workloads", tc.ck, nil)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin") {
			t.Errorf("%s: %d %s, want 303 to /signin", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("the gateway was called %d times without a session", n)
	}
}

func TestRefusedIdentitySeesNoWorkloads(t *testing.T) {
	c, _ := newConsole(t)
	ck, _ := signIn(t, c, "oidc:bob")
	resp := do(c, http.MethodGet, "/workloads?namespace=team-a", ck, nil)
	body := resp.Body
	if resp.StatusCode != http.StatusForbidden || strings.Contains(body, "nightly") || !strings.Contains(body, "may not list") {
		t.Fatalf("bob: %d, want 403 with the API's reason and no workload:\n%s", resp.StatusCode, body)
	}
}

func TestPagesGolden(t *testing.T) {
	c, _ := newConsole(t)
	ck, tok := signIn(t, c, "oidc:alice")
	erin, erinTok := signIn(t, c, "oidc:erin")
	csrf := regexp.MustCompile(regexp.QuoteMeta(tok) + "|" + regexp.QuoteMeta(erinTok))
	for name, resp := range map[string]reply{
		"workloads":          do(c, http.MethodGet, "/workloads?namespace=team-a", ck, nil),
		"workloads-noevents": do(c, http.MethodGet, "/workloads?namespace=team-a", erin, nil),
		"workload":           do(c, http.MethodGet, "/workloads/Service/web?namespace=team-a", ck, nil),
		"refused":            do(c, http.MethodPost, "/submit", ck, url.Values{"csrf": {tok}, "workload": {"kind: Service\nmetadata: {name: web}"}, "action": {"dry-run"}}),
	} {
		body := csrf.ReplaceAllString(resp.Body, "CSRF-TOKEN")
		golden.Assert(t, "testdata/"+name+".golden.html", []byte(body))
		if len(body) > 200<<10 {
			t.Errorf("%s: %d bytes, over 200 kB", name, len(body))
		}
	}
}
