package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"golang.org/x/sync/singleflight"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
)

// Identity is an authenticated caller, as the cluster's RBAC knows it.
type Identity struct {
	// User is the Kubernetes user name (system:serviceaccount:ns:sa for a
	// pod identity or a ServiceAccount token).
	User   string
	UID    string
	Groups []string
	Extra  map[string][]string
	// Method is mtls or token; SPIFFEID is set for mtls.
	Method   string
	SPIFFEID string
}

type identityKey struct{}

// WithIdentity returns ctx carrying an identity that an in-process front
// end (the web console) has already authenticated, so that a request it
// hands to Handler is authorized, checked, audited and rate limited as
// that identity. A request from the network cannot set a context value:
// only code linked into the gateway can.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// ErrUnauthenticated marks a caller the gateway cannot authenticate.
var ErrUnauthenticated = errors.New("unauthenticated")

// TokenReviewer is the part of the Kubernetes client authn needs.
type TokenReviewer interface {
	Create(ctx context.Context, tr *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error)
}

// Authenticator authenticates a request by its verified client
// certificate, else by its bearer token.
type Authenticator struct {
	// Roots returns the issuer's trust bundle (it rotates).
	Roots func() *x509.CertPool
	// TrustDomain client SPIFFE IDs must be in.
	TrustDomain spiffeid.TrustDomain
	Reviews     TokenReviewer
	// Audiences a token must be for (one of).
	Audiences []string
	Clock     Clock
	// tokens caches successful reviews by token hash, briefly.
	tokens *cache.LRUExpireCache
	ttl    time.Duration
	// flight: one review per token at a time (see Authorizer.flight).
	flight *singleflight.Group
}

// NewAuthenticator caches successful token reviews for ttl, at most size.
func NewAuthenticator(a Authenticator, ttl time.Duration, size int) *Authenticator {
	a.tokens = cache.NewLRUExpireCacheWithClock(size, a.Clock)
	a.flight = &singleflight.Group{}
	a.ttl = ttl
	return &a
}

// Authenticate returns the caller's identity, or an error wrapping
// ErrUnauthenticated that says why.
func (a *Authenticator) Authenticate(r *http.Request) (*Identity, error) {
	if id, ok := r.Context().Value(identityKey{}).(*Identity); ok && id != nil {
		return id, nil
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		return a.certificate(r.TLS.PeerCertificates)
	}
	h := r.Header.Get("Authorization")
	if tok, ok := strings.CutPrefix(h, "Bearer "); ok && tok != "" {
		return a.token(r.Context(), tok)
	}
	return nil, fmt.Errorf("%w: no client certificate and no bearer token", ErrUnauthenticated)
}

// certificate verifies a client chain against the issuer's roots at the
// clock's time and maps its SPIFFE ID (spiffe://<td>/ns/<ns>/sa/<sa>) to
// the ServiceAccount user the cluster's RBAC knows.
func (a *Authenticator) certificate(chain []*x509.Certificate) (*Identity, error) {
	leaf := chain[0]
	now := a.Clock.Now()
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("%w: client certificate expired at %s", ErrUnauthenticated, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: a.Roots(), Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("%w: client certificate not issued by the Trellis issuer: %w", ErrUnauthenticated, err)
	}
	if len(leaf.URIs) != 1 {
		return nil, fmt.Errorf("%w: client certificate has %d URI SANs, want one SPIFFE ID", ErrUnauthenticated, len(leaf.URIs))
	}
	id, err := spiffeid.FromURI(leaf.URIs[0])
	if err != nil {
		return nil, fmt.Errorf("%w: client certificate URI SAN: %w", ErrUnauthenticated, err)
	}
	if id.TrustDomain() != a.TrustDomain {
		return nil, fmt.Errorf("%w: SPIFFE ID %s is not in trust domain %s", ErrUnauthenticated, id, a.TrustDomain)
	}
	seg := strings.Split(strings.TrimPrefix(id.Path(), "/"), "/")
	if len(seg) != 4 || seg[0] != "ns" || seg[2] != "sa" {
		return nil, fmt.Errorf("%w: SPIFFE ID %s is not a pod identity (/ns/<namespace>/sa/<serviceaccount>)", ErrUnauthenticated, id)
	}
	return &Identity{
		User:     "system:serviceaccount:" + seg[1] + ":" + seg[3],
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + seg[1], "system:authenticated"},
		Method:   "mtls",
		SPIFFEID: id.String(),
	}, nil
}

// token asks the apiserver (TokenReview) who the token is, for the
// gateway's audiences; a token for another audience is refused.
func (a *Authenticator) token(ctx context.Context, tok string) (*Identity, error) {
	sum := sha256.Sum256([]byte(tok))
	key := hex.EncodeToString(sum[:])
	if v, ok := a.tokens.Get(key); ok {
		return v.(*Identity), nil
	}
	v, err, _ := a.flight.Do(key, func() (any, error) {
		if v, ok := a.tokens.Get(key); ok {
			return v, nil
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		return a.review(ctx, key, tok)
	})
	if err != nil {
		return nil, err
	}
	return v.(*Identity), nil
}

func (a *Authenticator) review(ctx context.Context, key, tok string) (*Identity, error) {
	tr, err := a.Reviews.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: tok, Audiences: a.Audiences}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token review failed: %w", err)
	}
	if !tr.Status.Authenticated {
		msg := tr.Status.Error
		if msg == "" {
			msg = "token not accepted"
		}
		return nil, fmt.Errorf("%w: %s", ErrUnauthenticated, msg)
	}
	if !slices.ContainsFunc(tr.Status.Audiences, func(s string) bool { return slices.Contains(a.Audiences, s) }) {
		return nil, fmt.Errorf("%w: token is for audiences %v, not %v", ErrUnauthenticated, tr.Status.Audiences, a.Audiences)
	}
	u := tr.Status.User
	id := &Identity{User: u.Username, UID: u.UID, Groups: u.Groups, Method: "token"}
	if len(u.Extra) > 0 {
		id.Extra = map[string][]string{}
		for k, v := range u.Extra {
			id.Extra[k] = v
		}
	}
	a.tokens.Add(key, id, a.ttl)
	return id, nil
}
