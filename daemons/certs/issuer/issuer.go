// Package issuer signs pod identity certificates for node agents. An agent
// authenticates with its service-account token; the token review names the
// node its pod runs on, and the issuer signs only for pods bound to that
// node. The identity (SPIFFE ID, DNS names) is derived from the pod object,
// never from the request.
package issuer

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/certsapi"
	"github.com/trellis-dev/trellis/internal/pki"
)

// NodeNameExtra is the token-review extra that names the node of the pod a
// bound service-account token was issued for.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// Config configures an Issuer.
type Config struct {
	TrustDomain spiffeid.TrustDomain
	// TTL of leaf certificates (default 1h).
	TTL time.Duration
	// Backdate of NotBefore, for peers with slow clocks (default 5m).
	Backdate time.Duration
	// ClusterDomain of service DNS names (default cluster.local).
	ClusterDomain string
	// AgentUsernames are the service accounts allowed to ask, e.g.
	// system:serviceaccount:trellis-system:trellis-cert-agent.
	AgentUsernames []string
	Client         kubernetes.Interface
	// Pods, when set, is consulted before the apiserver.
	Pods corelisters.PodLister
	// NodeRate limits signatures per node (default 200/s, burst 400).
	NodeRate  rate.Limit
	NodeBurst int
	Logger    *slog.Logger
	// Clock dates certificates and times the token-review cache, the
	// serving identity's renewal and the bundle checks (default the real
	// clock; tests step a fake one).
	Clock clock.WithTicker
}

// Issuer serves SignPath.
type Issuer struct {
	cfg   Config
	state atomic.Pointer[authority]
	// recorder, while RecordValidities runs, takes the validity records.
	recorder atomic.Pointer[recorder]
	log      *slog.Logger

	mu       sync.Mutex
	reviews  map[[32]byte]review
	limiters map[string]*rate.Limiter

	issued       prometheus.Counter
	refused      *prometheus.CounterVec
	latency      prometheus.Histogram
	recordFailed prometheus.Counter
	recorded     prometheus.Counter
	records      atomic.Int64
}

type review struct {
	node    string
	err     error
	expires time.Time
}

// New returns an issuer signing with state.
func New(cfg Config, state *pki.State) *Issuer {
	if cfg.TTL == 0 {
		cfg.TTL = time.Hour
	}
	if cfg.Backdate == 0 {
		cfg.Backdate = 5 * time.Minute
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	if cfg.NodeRate == 0 {
		cfg.NodeRate, cfg.NodeBurst = 200, 400
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	is := &Issuer{
		cfg: cfg, log: cfg.Logger, reviews: map[[32]byte]review{}, limiters: map[string]*rate.Limiter{},
		issued: prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_cert_issuer_issued_total", Help: "Certificates issued."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_cert_issuer_refused_total", Help: "Requests refused, by reason."},
			[]string{"reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "trellis_cert_issuer_sign_seconds", Help: "Time to answer a sign request.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		recorded: prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_cert_issuer_records_total",
			Help: "Validity records written onto pods (one per pod at a time: the newest certificate's)."}),
		recordFailed: prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_cert_issuer_record_failures_total",
			Help: "Certificates issued whose expiry could not be recorded on their pod."}),
	}
	if state != nil {
		is.state.Store(newAuthority(state))
	}
	return is
}

// Collectors are the issuer's metrics.
func (is *Issuer) Collectors() []prometheus.Collector {
	return []prometheus.Collector{is.issued, is.refused, is.latency, is.recorded, is.recordFailed}
}

// SetState replaces the authority (CA rotation); requests in flight finish
// with the old one.
func (is *Issuer) SetState(s *pki.State) {
	if old := is.state.Load(); old != nil && old.st.Equal(s) {
		return
	}
	is.state.Store(newAuthority(s))
	is.log.Info("certificate authority updated", "roots", len(s.Roots), "signer", pki.Fingerprint(s.Signer.Cert))
}

// Records is how many validity records were written onto pods.
func (is *Issuer) Records() int64 { return is.records.Load() }

// State is the current authority.
func (is *Issuer) State() *pki.State {
	if a := is.state.Load(); a != nil {
		return a.st
	}
	return nil
}

// authority is a state with the PEM every response carries, encoded once
// per CA rotation instead of once per certificate.
type authority struct {
	st        *pki.State
	bundle    []byte // the roots
	bundleB64 string // the roots' PEM in base64, as a JSON response carries it
	chain     []byte // the signing CA and intermediates, root excluded
}

func newAuthority(st *pki.State) *authority {
	bundle := st.Bundle()
	return &authority{st: st, bundle: bundle, bundleB64: base64.StdEncoding.EncodeToString(bundle), chain: pki.EncodeCerts(st.Chain...)}
}

// refusal is an error with an HTTP status and a metric reason.
type refusal struct {
	status int
	reason string
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func refuse(status int, reason string, format string, args ...any) error {
	return &refusal{status: status, reason: reason, err: fmt.Errorf(format, args...)}
}

// ServeHTTP answers POST SignPath and GET BundlePath.
func (is *Issuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == certsapi.BundlePath && r.Method == http.MethodGet:
		a := is.state.Load()
		if a == nil {
			http.Error(w, "no certificate authority loaded yet", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/x-pem-file")
		_, _ = w.Write(a.bundle)
	case r.URL.Path == certsapi.SignPath && r.Method == http.MethodPost:
		start := is.cfg.Clock.Now()
		body, err := is.handleSign(r)
		is.latency.Observe(is.cfg.Clock.Since(start).Seconds())
		if err != nil {
			var rf *refusal
			if !errors.As(err, &rf) {
				rf = &refusal{status: http.StatusInternalServerError, reason: "internal", err: err}
			}
			is.refused.WithLabelValues(rf.reason).Inc()
			is.log.Warn("refused a certificate request", "reason", rf.reason, "err", rf.err)
			writeJSON(w, rf.status, certsapi.Error{Error: rf.Error()})
			return
		}
		is.issued.Inc()
		w.Header().Set("Content-Type", "application/json")
		writeResponse(w, body)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// handleSign answers a sign request with the JSON of its SignResponse, in
// a pooled buffer for writeResponse.
func (is *Issuer) handleSign(r *http.Request) (*[]byte, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return nil, refuse(http.StatusUnauthorized, "unauthenticated", "no bearer token")
	}
	node, err := is.authenticate(r.Context(), token)
	if err != nil {
		return nil, err
	}
	if !is.limiter(node).Allow() {
		return nil, refuse(http.StatusTooManyRequests, "rate_limited", "node %s is over its rate limit", node)
	}
	var req certsapi.SignRequest
	if err := readSignRequest(r, &req); err != nil {
		return nil, refuse(http.StatusBadRequest, "bad_request", "failed to decode the request: %w", err)
	}
	s, err := is.sign(r.Context(), node, req)
	if err != nil {
		return nil, err
	}
	return s.authority.encodeSignResponse(s.leaf, s.id)
}

// Sign issues a certificate for the pod of req on behalf of an agent
// authenticated for node.
func (is *Issuer) Sign(ctx context.Context, node string, req certsapi.SignRequest) (*certsapi.SignResponse, error) {
	s, err := is.sign(ctx, node, req)
	if err != nil {
		return nil, err
	}
	return &certsapi.SignResponse{Chain: s.authority.chainPEM(s.leaf), Bundle: s.authority.bundle, SPIFFEID: s.id}, nil
}

// signed is a leaf, its SPIFFE ID and the authority that signed it.
type signed struct {
	leaf      []byte // DER
	id        string
	authority *authority
}

// sign checks req for node and signs its leaf.
func (is *Issuer) sign(ctx context.Context, node string, req certsapi.SignRequest) (signed, error) {
	pod, err := is.pod(ctx, req.Namespace, req.Name)
	if err != nil {
		return signed{}, err
	}
	switch {
	case string(pod.UID) != req.UID:
		return signed{}, refuse(http.StatusForbidden, "uid_mismatch", "pod %s/%s has UID %s, not %s", req.Namespace, req.Name, pod.UID, req.UID)
	case pod.Spec.NodeName != node:
		return signed{}, refuse(http.StatusForbidden, "wrong_node", "pod %s/%s runs on node %q, not on the agent's node %q", req.Namespace, req.Name, pod.Spec.NodeName, node)
	case pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return signed{}, refuse(http.StatusForbidden, "pod_finished", "pod %s/%s is terminating or finished", req.Namespace, req.Name)
	}
	block, _ := pem.Decode(req.CSR)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return signed{}, refuse(http.StatusBadRequest, "bad_csr", "no CERTIFICATE REQUEST PEM block")
	}
	csr, err := pki.ParseCSR(block.Bytes)
	if err != nil {
		return signed{}, refuse(http.StatusBadRequest, "bad_csr", "failed to parse the CSR: %w", err)
	}
	id, dns, err := is.Identity(pod)
	if err != nil {
		return signed{}, refuse(http.StatusBadRequest, "bad_identity", "%w", err)
	}
	a := is.state.Load()
	if a == nil {
		return signed{}, refuse(http.StatusServiceUnavailable, "no_authority", "no certificate authority loaded yet")
	}
	leaf, validity, err := a.st.SignDER(pki.LeafRequest{CSR: csr, ID: id, DNSNames: dns, TTL: is.cfg.TTL, Backdate: is.cfg.Backdate}, is.cfg.Clock.Now())
	if errors.Is(err, pki.ErrBadCSR) {
		return signed{}, refuse(http.StatusBadRequest, "bad_csr", "%w", err)
	}
	if err != nil {
		return signed{}, err
	}
	is.record(ctx, pod, validity)
	if is.log.Enabled(ctx, slog.LevelDebug) { // the arguments cost allocations even when not logged
		is.log.DebugContext(ctx, "issued", "id", id.String(), "pod", pod.Namespace+"/"+pod.Name, "node", node, "notAfter", validity.NotAfter)
	}
	return signed{leaf: leaf, id: id.String(), authority: a}, nil
}

// Identity is the SPIFFE ID and DNS names a pod gets.
func (is *Issuer) Identity(pod *corev1.Pod) (spiffeid.ID, []string, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	id, err := spiffeid.FromSegments(is.cfg.TrustDomain, "ns", pod.Namespace, "sa", sa)
	if err != nil {
		return spiffeid.ID{}, nil, fmt.Errorf("make the SPIFFE ID of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var dns []string
	if svc := pod.Labels[wellknown.LabelService]; svc != "" {
		dns = append(dns, fmt.Sprintf("%s.%s.svc.%s", svc, pod.Namespace, is.cfg.ClusterDomain))
	}
	return id, dns, nil
}

func (is *Issuer) pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	if ns == "" || name == "" {
		return nil, refuse(http.StatusBadRequest, "bad_request", "namespace and name are required")
	}
	if is.cfg.Pods != nil {
		if p, err := is.cfg.Pods.Pods(ns).Get(name); err == nil {
			return p, nil
		}
	}
	// Not in the cache yet (a pod seconds old): ask the apiserver.
	p, err := is.cfg.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, refuse(http.StatusForbidden, "no_such_pod", "pod %s/%s does not exist", ns, name)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to get pod %s/%s: %w", ns, name, err)
	}
	return p, nil
}

// authenticate reviews an agent's token (cached for a minute, errors for
// five seconds) and returns the node its pod runs on.
func (is *Issuer) authenticate(ctx context.Context, token string) (string, error) {
	key := sha256.Sum256([]byte(token))
	now := is.cfg.Clock.Now()
	is.mu.Lock()
	rv, ok := is.reviews[key]
	is.mu.Unlock()
	if ok && now.Before(rv.expires) {
		return rv.node, rv.err
	}
	rv = review{expires: now.Add(time.Minute)}
	tr, err := is.cfg.Client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	switch {
	case err != nil:
		return "", fmt.Errorf("token review failed: %w", err) // not cached: the apiserver may be back soon
	case !tr.Status.Authenticated:
		rv.err = refuse(http.StatusUnauthorized, "unauthenticated", "token not authenticated: %s", tr.Status.Error)
	case !slices.Contains(is.cfg.AgentUsernames, tr.Status.User.Username):
		rv.err = refuse(http.StatusForbidden, "not_an_agent", "%s is not a certificate agent", tr.Status.User.Username)
	default:
		nodes := tr.Status.User.Extra[NodeNameExtra]
		if len(nodes) != 1 || nodes[0] == "" {
			rv.err = refuse(http.StatusForbidden, "unbound_token", "the agent's token is not bound to a pod on a node")
		} else {
			rv.node = nodes[0]
		}
	}
	if rv.err != nil {
		rv.expires = now.Add(5 * time.Second)
	}
	is.mu.Lock()
	if len(is.reviews) > 10000 { // bounded: drop everything rather than grow
		clear(is.reviews)
	}
	is.reviews[key] = rv
	is.mu.Unlock()
	return rv.node, rv.err
}

func (is *Issuer) limiter(node string) *rate.Limiter {
	is.mu.Lock()
	defer is.mu.Unlock()
	l, ok := is.limiters[node]
	if !ok {
		l = rate.NewLimiter(is.cfg.NodeRate, is.cfg.NodeBurst)
		is.limiters[node] = l
	}
	return l
}
