package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/internal/pki"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

func testState(t *testing.T, now time.Time) *pki.State {
	t.Helper()
	root, err := pki.NewRoot("trellis.local", 48*time.Hour, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := pki.NewIntermediate(root, "trellis.local", 24*time.Hour, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return pki.NewState(root, signer)
}

func leafFor(t *testing.T, st *pki.State, id spiffeid.ID, now time.Time) []*x509.Certificate {
	t.Helper()
	key, _ := pki.NewKey()
	csr, _ := pki.NewCSR(key)
	chain, err := st.Sign(pki.LeafRequest{CSR: csr, ID: id, TTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	return chain
}

func TestAuthenticateCertificate(t *testing.T) {
	now := time.Now()
	clock := &fakeClock{now}
	st, other := testState(t, now), testState(t, now)
	roots := x509.NewCertPool()
	roots.AddCert(st.Roots[0])
	a := NewAuthenticator(Authenticator{Roots: func() *x509.CertPool { return roots }, TrustDomain: spiffeid.RequireTrustDomainFromString("trellis.local"), Clock: clock}, time.Second, 10)
	td := spiffeid.RequireTrustDomainFromString("trellis.local")
	req := func(chain []*x509.Certificate) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.TLS = &tls.ConnectionState{PeerCertificates: chain}
		return r
	}
	id, err := a.Authenticate(req(leafFor(t, st, spiffeid.RequireFromSegments(td, "ns", "team-a", "sa", "ci"), now)))
	if err != nil || id.User != "system:serviceaccount:team-a:ci" || id.Groups[1] != "system:serviceaccounts:team-a" {
		t.Fatalf("pod identity: %+v %v", id, err)
	}
	for name, tc := range map[string]struct {
		chain []*x509.Certificate
		at    time.Time
		want  string
	}{
		"expired":            {leafFor(t, st, spiffeid.RequireFromSegments(td, "ns", "a", "sa", "b"), now), now.Add(2 * time.Hour), "expired"},
		"other CA":           {leafFor(t, other, spiffeid.RequireFromSegments(td, "ns", "a", "sa", "b"), now), now, "not issued by the Trellis issuer"},
		"other trust domain": {leafFor(t, st, spiffeid.RequireFromSegments(spiffeid.RequireTrustDomainFromString("evil.org"), "ns", "a", "sa", "b"), now), now, "not in trust domain"},
		"not a pod identity": {leafFor(t, st, spiffeid.RequireFromSegments(td, "node", "n1"), now), now, "not a pod identity"},
	} {
		clock.t = tc.at
		_, err := a.Authenticate(req(tc.chain))
		if !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	clock.t = now
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	if _, err := a.Authenticate(r); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("anonymous: %v", err)
	}
}

// fakeReviewer answers SubjectAccessReviews from a set and counts them.
type fakeReviewer struct {
	allow map[string]bool
	calls int
}

func (f *fakeReviewer) Create(_ context.Context, sar *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	f.calls++
	a := sar.Spec.ResourceAttributes
	sar.Status.Allowed = f.allow[sar.Spec.User+" "+a.Namespace+" "+a.Verb]
	return sar, nil
}

func TestAuthorizerCachesBriefly(t *testing.T) {
	clock := &fakeClock{time.Now()}
	f := &fakeReviewer{allow: map[string]bool{"u ns create": true}}
	a := NewAuthorizer(f, clock, 10*time.Second, 5*time.Second, 2)
	id := &Identity{User: "u"}
	ctx := context.Background()
	for range 3 {
		if err := a.Authorize(ctx, id, "ns", "trellisservices", "create"); err != nil {
			t.Fatal(err)
		}
		if err := a.Authorize(ctx, id, "ns", "trellisservices", "delete"); !errors.Is(err, ErrForbidden) {
			t.Fatalf("denied: %v", err)
		}
	}
	if f.calls != 2 {
		t.Errorf("%d reviews for 2 distinct questions, want 2 (cached)", f.calls)
	}
	clock.t = clock.t.Add(6 * time.Second) // denial expired, allowance not
	_ = a.Authorize(ctx, id, "ns", "trellisservices", "create")
	_ = a.Authorize(ctx, id, "ns", "trellisservices", "delete")
	if f.calls != 3 {
		t.Errorf("%d reviews after the denial TTL, want 3", f.calls)
	}
	// Bounded: a third question evicts the least recently used.
	_ = a.Authorize(ctx, id, "ns2", "trellisservices", "get")
	if n := len(a.cache.Keys()); n > 2 {
		t.Errorf("cache holds %d entries, bound 2", n)
	}
}

func TestRateLimiter(t *testing.T) {
	clock := &fakeClock{time.Now()}
	l := NewRateLimiter(1, 2, clock, 2)
	for i := range 2 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("burst %d refused", i)
		}
	}
	ok, after := l.Allow("a")
	if ok || RetryAfterSeconds(after) != 1 {
		t.Fatalf("third: ok=%v retry after %s", ok, after)
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Errorf("another identity was limited")
	}
	clock.t = clock.t.Add(time.Second)
	if ok, _ := l.Allow("a"); !ok {
		t.Errorf("refused after the bucket refilled")
	}
	l.Allow("c")
	if len(l.buckets) > 2 {
		t.Errorf("%d buckets, bound 2", len(l.buckets))
	}
}
