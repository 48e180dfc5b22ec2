package certs

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/internal/certsapi"
	"github.com/trellis-dev/trellis/internal/pki"
)

// fakeAgent signs CSRs on a Unix socket with a fixed authority, dating the
// certificates on the test's clock; down makes it refuse as an agent whose
// issuer is unreachable.
type fakeAgent struct {
	socket string
	down   atomic.Bool
	// signs counts sign requests, refused ones included.
	signs atomic.Int32
}

func startFakeAgent(t *testing.T, fc *clocktesting.FakeClock, ttl time.Duration) *fakeAgent {
	t.Helper()
	root, err := pki.NewRoot("trellis.test", 24*time.Hour, fc.Now())
	if err != nil {
		t.Fatal(err)
	}
	signer, err := pki.NewIntermediate(root, "trellis.test", 12*time.Hour, fc.Now())
	if err != nil {
		t.Fatal(err)
	}
	st := pki.NewState(root, signer)
	id := spiffeid.RequireFromSegments(spiffeid.RequireTrustDomainFromString("trellis.test"), "ns", "shop", "sa", "web")
	a := &fakeAgent{socket: filepath.Join(t.TempDir(), "agent.sock")}
	l, err := net.Listen("unix", a.socket)
	if err != nil {
		t.Fatal(err)
	}
	refuse := func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusBadGateway)
		_ = json.NewEncoder(w).Encode(certsapi.Error{Error: "issuer unreachable"})
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case certsapi.BundlePath:
			if a.down.Load() {
				refuse(w)
				return
			}
			_, _ = w.Write(st.Bundle())
		case certsapi.SignPath:
			a.signs.Add(1)
			if a.down.Load() {
				refuse(w)
				return
			}
			body, _ := io.ReadAll(r.Body)
			block, _ := pem.Decode(body)
			if block == nil {
				http.Error(w, "no CSR", http.StatusBadRequest)
				return
			}
			csr, err := x509.ParseCertificateRequest(block.Bytes)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			chain, err := st.Sign(pki.LeafRequest{CSR: csr, ID: id, TTL: ttl}, fc.Now())
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			_ = json.NewEncoder(w).Encode(certsapi.SignResponse{Chain: pki.EncodeCerts(chain...), Bundle: st.Bundle(), SPIFFEID: id.String()})
		default:
			http.NotFound(w, r)
		}
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return a
}

// runSidecar runs a sidecar on fc until the test ends.
func runSidecar(t *testing.T, fc *clocktesting.FakeClock, socket string) string {
	t.Helper()
	dir := t.TempDir()
	s := New(Config{Socket: socket, Dir: dir, Clock: fc})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return dir
}

// waitWaiting waits until the sidecar blocks on the fake clock, its only
// user: everything it does until then happens before the next step.
func waitWaiting(t *testing.T, fc *clocktesting.FakeClock) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return fc.HasWaiters(), nil
	})
	if err != nil {
		t.Fatal("the sidecar never waited on its clock")
	}
}

func notAfter(t *testing.T, dir string) time.Time {
	t.Helper()
	id, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return id.Chain[0].NotAfter
}

// TestRenewsAtTwoThirdsOfTheLifetime: a 1h certificate is renewed 40
// minutes after it was issued, not before; the bundle is refreshed every
// minute in between.
func TestRenewsAtTwoThirdsOfTheLifetime(t *testing.T) {
	t.Parallel()
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	issued := fc.Now()
	agent := startFakeAgent(t, fc, time.Hour)
	dir := runSidecar(t, fc, agent.socket)
	for range 39 {
		waitWaiting(t, fc)
		fc.Step(time.Minute)
	}
	waitWaiting(t, fc)
	if n := agent.signs.Load(); n != 1 {
		t.Fatalf("%d sign requests in the first 39 minutes, want 1", n)
	}
	if got := notAfter(t, dir); !got.Equal(issued.Add(time.Hour)) {
		t.Fatalf("certificate expires at %s, want %s", got, issued.Add(time.Hour))
	}
	fc.Step(time.Minute)
	waitWaiting(t, fc)
	if n := agent.signs.Load(); n != 2 {
		t.Fatalf("%d sign requests at 40 minutes, want the renewal", n)
	}
	if got, want := notAfter(t, dir), issued.Add(40*time.Minute+time.Hour); !got.Equal(want) {
		t.Fatalf("renewed certificate expires at %s, want %s", got, want)
	}
}

// TestRenewalBacksOffWhileTheAgentIsDown: the agent is down across the
// renewal point; the sidecar keeps its valid certificate, retries with a
// growing backoff rather than in a loop, and renews once the agent is back.
func TestRenewalBacksOffWhileTheAgentIsDown(t *testing.T) {
	t.Parallel()
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	agent := startFakeAgent(t, fc, time.Hour)
	dir := runSidecar(t, fc, agent.socket)
	waitWaiting(t, fc)
	first := notAfter(t, dir)
	agent.down.Store(true)
	// Ten minutes past the renewal point, a second at a time.
	for range 50 * 60 {
		waitWaiting(t, fc)
		fc.Step(time.Second)
		if err := Check(dir, fc.Now()); err != nil {
			t.Fatalf("at %s: %v", fc.Now(), err)
		}
	}
	waitWaiting(t, fc)
	if got := notAfter(t, dir); !got.Equal(first) {
		t.Fatalf("the certificate changed while the agent was down: %s, want %s", got, first)
	}
	// 200ms doubling to 30s (jitter up to +50%) over 10 minutes: about 20
	// attempts, not one per second.
	attempts := agent.signs.Load() - 1
	if attempts < 10 || attempts > 40 {
		t.Fatalf("%d renewal attempts in the 10 minutes the agent was down, want 10-40", attempts)
	}
	t.Logf("%d renewal attempts in the 10 minutes the agent was down", attempts)
	agent.down.Store(false)
	for range 46 { // the longest backoff: 30s + 50% jitter
		waitWaiting(t, fc)
		fc.Step(time.Second)
		if agent.signs.Load() > attempts+1 {
			break
		}
	}
	waitWaiting(t, fc)
	if got := notAfter(t, dir); !got.After(first) {
		t.Fatalf("not renewed within the longest backoff of the agent's return: expires %s", got)
	}
}
