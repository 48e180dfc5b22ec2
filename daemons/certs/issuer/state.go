package issuer

import (
	"context"
	"crypto/x509"
	"fmt"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/trellis-dev/trellis/internal/pki"
)

// WatchSecret keeps the issuer's authority equal to the CA Secret ns/name
// (rotation is a Secret update) until ctx ends. It returns once the Secret
// has been loaded, or with an error if it cannot be within the timeout.
func (is *Issuer) WatchSecret(ctx context.Context, client kubernetes.Interface, ns, name string, timeout time.Duration) error {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := f.Core().V1().Secrets().Informer()
	loaded := make(chan struct{})
	var once sync.Once
	apply := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return
		}
		st, err := pki.Load(s.Data)
		if err != nil {
			is.log.Error("the CA secret is invalid; keeping the current authority", "secret", ns+"/"+name, "err", err)
			return
		}
		is.SetState(st)
		once.Do(func() { close(loaded) })
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: apply, UpdateFunc: func(_, n any) { apply(n) }}); err != nil {
		return fmt.Errorf("watch the CA secret: %w", err)
	}
	f.Start(ctx.Done())
	select {
	case <-loaded:
		return nil
	case <-is.cfg.Clock.After(timeout):
		return fmt.Errorf("CA secret %s/%s not loaded within %s", ns, name, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Serving is the issuer's own TLS identity, issued by its authority and
// renewed at two thirds of its lifetime or when the authority changes.
type Serving struct {
	is  *Issuer
	id  spiffeid.ID
	dns []string

	mu     sync.Mutex
	svid   *x509svid.SVID
	renew  time.Time
	signer *x509.Certificate
}

// NewServing returns the serving identity for id and DNS names.
func (is *Issuer) NewServing(id spiffeid.ID, dns ...string) *Serving {
	return &Serving{is: is, id: id, dns: dns}
}

// GetX509SVID implements x509svid.Source.
func (s *Serving) GetX509SVID() (*x509svid.SVID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.is.State()
	now := s.is.cfg.Clock.Now()
	if s.svid != nil && now.Before(s.renew) && s.signer.Equal(st.Signer.Cert) {
		return s.svid, nil
	}
	key, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	csr, err := pki.NewCSR(key)
	if err != nil {
		return nil, err
	}
	chain, err := st.Sign(pki.LeafRequest{CSR: csr, ID: s.id, DNSNames: s.dns, TTL: s.is.cfg.TTL, Backdate: s.is.cfg.Backdate}, now)
	if err != nil {
		return nil, err
	}
	s.svid = &x509svid.SVID{ID: s.id, Certificates: chain, PrivateKey: key}
	s.renew = now.Add(s.is.cfg.TTL * 2 / 3)
	s.signer = st.Signer.Cert
	return s.svid, nil
}

// GetX509BundleForTrustDomain implements x509bundle.Source with the
// authority's current roots.
func (is *Issuer) GetX509BundleForTrustDomain(td spiffeid.TrustDomain) (*x509bundle.Bundle, error) {
	if td != is.cfg.TrustDomain {
		return nil, fmt.Errorf("no bundle for trust domain %q", td)
	}
	return x509bundle.FromX509Authorities(td, is.State().Roots), nil
}
