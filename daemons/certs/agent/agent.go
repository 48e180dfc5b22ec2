// Package agent is the node agent of pod identities. It serves a Unix
// socket to the pods of its node, finds out which pod a caller belongs to
// from the kernel (peer credentials -> PID -> cgroup -> pod UID -> pod, from
// a node-scoped informer), and forwards the caller's CSR to the issuer with
// its own node-bound credential. A caller never names its identity.
package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/daemons/certs/attest"
	"github.com/trellis-dev/trellis/internal/certsapi"
	"github.com/trellis-dev/trellis/internal/nodepods"
)

const uidIndex = "uid"

// Config configures an Agent.
type Config struct {
	NodeName string
	Client   kubernetes.Interface
	// ListWatch overrides the node-scoped pod list/watch (tests delay it to
	// exercise the start-up race).
	ListWatch cache.ListerWatcher
	// IssuerURL is the issuer's base URL; IssuerTLS verifies it.
	IssuerURL string
	IssuerTLS *tls.Config
	// TokenFile holds the agent's node-bound service-account token; it is
	// re-read on every request (projected tokens rotate).
	TokenFile string
	// ProcRoot is where process information lives (default /proc).
	ProcRoot string
	// AttestTimeout bounds the wait for a caller's pod to reach the cache
	// (default 5s): a pod that started a moment ago may not be there yet.
	AttestTimeout time.Duration
	// PodRate limits requests per pod (default 1/s, burst 5).
	PodRate  rate.Limit
	PodBurst int
	Logger   *slog.Logger
	// Clock times the attestation wait (default the real clock; tests
	// step a fake one).
	Clock clock.Clock
}

// Agent serves the pods of one node.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	informer cache.SharedIndexInformer
	http     *http.Client

	mu       sync.Mutex
	limiters map[types.UID]*rate.Limiter

	requests *prometheus.CounterVec
	latency  prometheus.Histogram
	waits    prometheus.Counter
}

// New returns an agent; Run starts its pod cache and Serve its socket.
func New(cfg Config) (*Agent, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("the node name is required")
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.AttestTimeout == 0 {
		cfg.AttestTimeout = 5 * time.Second
	}
	if cfg.PodRate == 0 {
		cfg.PodRate, cfg.PodBurst = 1, 5
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	a := &Agent{
		cfg: cfg, log: cfg.Logger, limiters: map[types.UID]*rate.Limiter{},
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg.IssuerTLS, MaxIdleConnsPerHost: 8}},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_cert_agent_requests_total", Help: "Requests from pods, by result."},
			[]string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "trellis_cert_agent_request_seconds", Help: "Time to answer a pod.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		waits: prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_cert_agent_attestation_waits_total", Help: "Callers whose pod was not yet in the cache."}),
	}
	if cfg.ListWatch != nil {
		a.informer = cache.NewSharedIndexInformer(cfg.ListWatch, &corev1.Pod{}, 0, cache.Indexers{})
	} else {
		a.informer = nodepods.NewInformer(cfg.Client, cfg.NodeName)
	}
	if err := a.informer.AddIndexers(cache.Indexers{uidIndex: func(obj any) ([]string, error) {
		return []string{string(obj.(*corev1.Pod).UID)}, nil
	}}); err != nil {
		return nil, fmt.Errorf("index pods by UID: %w", err)
	}
	return a, nil
}

// Collectors are the agent's metrics.
func (a *Agent) Collectors() []prometheus.Collector {
	return []prometheus.Collector{a.requests, a.latency, a.waits}
}

// Run runs the pod cache until ctx ends.
func (a *Agent) Run(ctx context.Context) { a.informer.Run(ctx.Done()) }

// HasSynced reports whether the pod cache has its first list.
func (a *Agent) HasSynced() bool { return a.informer.HasSynced() }

type pidKey struct{}

// Serve answers pods on a Unix socket at path (created world-writable: the
// kernel, not file permissions, says who the caller is) until ctx ends.
func (a *Agent) Serve(ctx context.Context, path string) error {
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("failed to listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o777); err != nil {
		l.Close()
		return fmt.Errorf("open the socket to all users: %w", err)
	}
	return a.ServeListener(ctx, l)
}

// ServeListener is Serve on an open Unix listener.
func (a *Agent) ServeListener(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           a,
		ReadHeaderTimeout: 5 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			pid, err := attest.PeerPID(c)
			if err != nil {
				return context.WithValue(ctx, pidKey{}, err)
			}
			return context.WithValue(ctx, pidKey{}, pid)
		},
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve the agent API: %w", err)
	}
	return nil
}

type status struct {
	code int
	err  error
}

func (s *status) Error() string { return s.err.Error() }

// ServeHTTP answers SignPath (POST, body: PEM CSR) and BundlePath (GET).
func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := a.cfg.Clock.Now()
	var body []byte
	var err error
	switch {
	case r.URL.Path == certsapi.SignPath && r.Method == http.MethodPost:
		body, err = a.sign(r)
	case r.URL.Path == certsapi.BundlePath && r.Method == http.MethodGet:
		body, err = a.bundle(r.Context())
	default:
		http.NotFound(w, r)
		return
	}
	a.latency.Observe(a.cfg.Clock.Since(start).Seconds())
	if err != nil {
		st := &status{code: http.StatusInternalServerError, err: err}
		errors.As(err, &st)
		a.requests.WithLabelValues(fmt.Sprint(st.code)).Inc()
		a.log.Warn("refused a pod's request", "code", st.code, "err", err)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st.code)
		_ = json.NewEncoder(w).Encode(certsapi.Error{Error: err.Error()})
		return
	}
	a.requests.WithLabelValues("200").Inc()
	_, _ = w.Write(body)
}

// Attest returns the pod the process pid belongs to, waiting up to
// AttestTimeout for a new pod to reach the cache.
func (a *Agent) Attest(ctx context.Context, pid int32) (*corev1.Pod, error) {
	uid, err := attest.PodUIDOfPID(a.cfg.ProcRoot, pid)
	if errors.Is(err, attest.ErrNotAPod) {
		return nil, &status{http.StatusForbidden, fmt.Errorf("pid %d: %w", pid, err)}
	}
	if err != nil {
		return nil, &status{http.StatusForbidden, err}
	}
	deadline := a.cfg.Clock.Now().Add(a.cfg.AttestTimeout)
	waited := false
	for {
		objs, err := a.informer.GetIndexer().ByIndex(uidIndex, string(uid))
		if err != nil {
			return nil, fmt.Errorf("look up pod UID %s: %w", uid, err)
		}
		if len(objs) == 1 {
			pod := objs[0].(*corev1.Pod)
			if pod.Spec.NodeName != a.cfg.NodeName {
				return nil, &status{http.StatusForbidden, fmt.Errorf("pod %s/%s is not on node %s", pod.Namespace, pod.Name, a.cfg.NodeName)}
			}
			// The PID may have been reused between reading its cgroups and
			// now: read them again and insist on the same pod.
			again, err := attest.PodUIDOfPID(a.cfg.ProcRoot, pid)
			if err != nil || again != uid {
				return nil, &status{http.StatusForbidden, fmt.Errorf("pid %d changed pods during attestation", pid)}
			}
			return pod, nil
		}
		if !waited {
			waited = true
			a.waits.Inc()
		}
		if a.cfg.Clock.Now().After(deadline) {
			return nil, &status{http.StatusForbidden, fmt.Errorf("pid %d is in pod UID %s, which is not a pod of node %s (waited %s)", pid, uid, a.cfg.NodeName, a.cfg.AttestTimeout)}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-a.cfg.Clock.After(50 * time.Millisecond):
		}
	}
}

func (a *Agent) sign(r *http.Request) ([]byte, error) {
	pidOrErr := r.Context().Value(pidKey{})
	pid, ok := pidOrErr.(int32)
	if !ok {
		return nil, &status{http.StatusForbidden, fmt.Errorf("cannot identify the caller: %v", pidOrErr)}
	}
	pod, err := a.Attest(r.Context(), pid)
	if err != nil {
		return nil, err
	}
	if !a.limiter(pod.UID).Allow() {
		return nil, &status{http.StatusTooManyRequests, fmt.Errorf("pod %s/%s is over its rate limit", pod.Namespace, pod.Name)}
	}
	csr, err := io.ReadAll(io.LimitReader(r.Body, 16<<10))
	if err != nil {
		return nil, &status{http.StatusBadRequest, err}
	}
	req, _ := json.Marshal(certsapi.SignRequest{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), CSR: csr})
	return a.toIssuer(r.Context(), http.MethodPost, certsapi.SignPath, req)
}

func (a *Agent) bundle(ctx context.Context) ([]byte, error) {
	return a.toIssuer(ctx, http.MethodGet, certsapi.BundlePath, nil)
}

func (a *Agent) toIssuer(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	token, err := os.ReadFile(a.cfg.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("failed to read the agent token: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.cfg.IssuerURL+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("make the %s %s request to the issuer: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, &status{http.StatusBadGateway, fmt.Errorf("issuer unreachable: %w", err)}
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, &status{http.StatusBadGateway, err}
	}
	if resp.StatusCode != http.StatusOK {
		var e certsapi.Error
		_ = json.Unmarshal(out, &e)
		code := resp.StatusCode
		if code >= 500 {
			code = http.StatusBadGateway
		}
		return nil, &status{code, fmt.Errorf("issuer refused (%d): %s", resp.StatusCode, e.Error)}
	}
	return out, nil
}

func (a *Agent) limiter(uid types.UID) *rate.Limiter {
	a.mu.Lock()
	defer a.mu.Unlock()
	l, ok := a.limiters[uid]
	if !ok {
		if len(a.limiters) > 4096 {
			clear(a.limiters)
		}
		l = rate.NewLimiter(a.cfg.PodRate, a.cfg.PodBurst)
		a.limiters[uid] = l
	}
	return l
}
