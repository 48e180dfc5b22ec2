package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/controller"
	"github.com/trellis-dev/trellis/daemons/certs/issuer"
)

// UserAgent is the gateway's user agent towards the apiserver (its
// requests are counted by it in the audit log).
const UserAgent = "trellis-gateway"

// Gateway is a running trellis-gateway.
type Gateway struct {
	cfg       Config
	cache     cache.Cache
	dyn       dynamic.Interface
	fleet     dynamic.Interface // the fleet's apiserver (Config.Fleet), or nil
	authn     *Authenticator
	authz     *Authorizer
	limiter   *RateLimiter
	admission controller.Admission
	audit     *Auditor
	results   *resultCache
	locks     [64]sync.Mutex
	metrics   *metrics
	handler   http.Handler
	mux       *http.ServeMux
	ready     atomic.Bool
}

// New builds the gateway; Run starts it.
func New(cfg Config) (*Gateway, error) {
	cfg.defaults()
	if cfg.Rest == nil {
		return nil, errors.New("gateway: Config.Rest is required")
	}
	td, err := spiffeid.TrustDomainFromString(cfg.TrustDomain)
	if err != nil {
		return nil, fmt.Errorf("invalid trust domain %q: %w", cfg.TrustDomain, err)
	}
	rc := rest.CopyConfig(cfg.Rest)
	rc.UserAgent = UserAgent
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return timingTransport{next: rt} })
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("failed to create the kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("failed to create the dynamic client: %w", err)
	}
	c, err := newCache(rc, cfg.Namespace)
	if err != nil {
		return nil, err
	}
	var fleetDyn dynamic.Interface
	if cfg.Fleet != nil {
		fc := rest.CopyConfig(cfg.Fleet)
		fc.UserAgent = UserAgent
		fc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return timingTransport{next: rt} })
		if fleetDyn, err = dynamic.NewForConfig(fc); err != nil {
			return nil, fmt.Errorf("failed to create the fleet's client: %w", err)
		}
	}
	g := &Gateway{cfg: cfg, cache: c, dyn: dyn, fleet: fleetDyn, audit: NewAuditor(cfg.Audit), results: newResultCache(cfg.Clock), metrics: newMetrics()}
	g.authn = NewAuthenticator(Authenticator{
		Roots: g.roots, TrustDomain: td, Reviews: kube.AuthenticationV1().TokenReviews(),
		Audiences: cfg.Audiences, Clock: cfg.Clock,
	}, cfg.TokenCacheTTL, cfg.AuthCacheSize)
	g.authz = NewAuthorizer(kube.AuthorizationV1().SubjectAccessReviews(), cfg.Clock, cfg.AllowTTL, cfg.DenyTTL, cfg.AuthCacheSize)
	g.limiter = NewRateLimiter(cfg.RatePerSecond, cfg.RateBurst, cfg.Clock, cfg.RateIdentities)
	g.admission = controller.Admission{Profiles: controller.CachedProfile{Reader: c}, DaemonNamespaces: cfg.DaemonNamespaces}
	g.handler = g.routes()
	return g, nil
}

// Handler is the gateway's HTTP API (for tests and embedding).
func (g *Gateway) Handler() http.Handler { return g.handler }

// Authorizer is the gateway's SubjectAccessReview client (the console
// asks it about resources the API has no route for).
func (g *Gateway) Authorizer() *Authorizer { return g.authz }

// Run starts the cache, waits for it, and serves HTTPS until ctx ends.
func (g *Gateway) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Stopped before it was ready is a clean stop, not a failure.
	if err := indexCache(ctx, g.cache); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	errc := make(chan error, 2)
	go func() { errc <- g.cache.Start(ctx) }()
	if !g.cache.WaitForCacheSync(ctx) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("informer cache did not sync")
	}
	g.ready.Store(true)
	certs, err := newCertReloader(g.cfg.TLSCertFile, g.cfg.TLSKeyFile)
	if err != nil {
		return err
	}
	ln := g.cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", g.cfg.Addr); err != nil {
			return fmt.Errorf("failed to listen on %s: %w", g.cfg.Addr, err)
		}
	}
	srv := &http.Server{
		Handler:           g.handler,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.get,
			// Verified by the authenticator, so that an expired or
			// foreign certificate gets a 401 that says why, not a
			// handshake failure.
			ClientAuth: tls.RequestClientCert,
		},
	}
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	g.cfg.Log.Info("serving", "addr", ln.Addr().String())
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shut, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	_ = srv.Shutdown(shut)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// roots are the client CA roots: ClientCAFile, else the issuer's trust
// bundle ConfigMap from the cache (so a rotation is picked up).
func (g *Gateway) roots() *x509.CertPool {
	pool := x509.NewCertPool()
	if g.cfg.ClientCAFile != "" {
		if b, err := os.ReadFile(g.cfg.ClientCAFile); err == nil {
			pool.AppendCertsFromPEM(b)
		}
		return pool
	}
	cm := &corev1.ConfigMap{}
	if err := g.cache.Get(context.Background(), client.ObjectKey{Namespace: g.cfg.Namespace, Name: issuer.BundleConfigMap}, cm); err == nil {
		pool.AppendCertsFromPEM([]byte(cm.Data[issuer.BundleKey]))
	}
	return pool
}

// certReloader serves the certificate in its files, re-reading them when
// their modification time changes (checked at most every 10 s).
type certReloader struct {
	certFile, keyFile string
	mu                sync.Mutex
	cert              *tls.Certificate
	mod               time.Time
	checked           time.Time
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *certReloader) load() error {
	st, err := os.Stat(r.certFile)
	if err != nil {
		return fmt.Errorf("failed to read the serving certificate: %w", err)
	}
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("failed to load the serving certificate %s: %w", r.certFile, err)
	}
	r.cert, r.mod = &c, st.ModTime()
	return nil
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) > 10*time.Second {
		r.checked = time.Now()
		if st, err := os.Stat(r.certFile); err == nil && !st.ModTime().Equal(r.mod) {
			_ = r.load() // keep serving the old one if the new is torn
		}
	}
	return r.cert, nil
}
