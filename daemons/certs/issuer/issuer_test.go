package issuer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/internal/certsapi"
	"github.com/trellis-dev/trellis/internal/pki"
)

var td = spiffeid.RequireTrustDomainFromString("trellis.test")

func newIssuer(t *testing.T, fc *clocktesting.FakeClock, client *fake.Clientset) *Issuer {
	t.Helper()
	root, err := pki.NewRoot(td.Name(), 24*time.Hour, fc.Now())
	if err != nil {
		t.Fatal(err)
	}
	signer, err := pki.NewIntermediate(root, td.Name(), 12*time.Hour, fc.Now())
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{TrustDomain: td, Client: client, Clock: fc, // TTL 1h, backdate 5m
		AgentUsernames: []string{"system:serviceaccount:trellis-system:trellis-cert-agent"}}, pki.NewState(root, signer))
}

// TestCertificatesDatedOnTheClock: leaves run from the clock's now minus
// the backdate to now plus the TTL.
func TestCertificatesDatedOnTheClock(t *testing.T) {
	t.Parallel()
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: "u1"}, Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "web"}}
	is := newIssuer(t, fc, fake.NewClientset(pod))
	fc.Step(3 * time.Hour)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := is.Sign(context.Background(), "node-a", certsapi.SignRequest{Namespace: "shop", Name: "web-1", UID: "u1",
		CSR: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})})
	if err != nil {
		t.Fatal(err)
	}
	chain, err := pki.ParseCerts(resp.Chain)
	if err != nil {
		t.Fatal(err)
	}
	if nb, na := chain[0].NotBefore, chain[0].NotAfter; !nb.Equal(fc.Now().Add(-5*time.Minute)) || !na.Equal(fc.Now().Add(time.Hour)) {
		t.Fatalf("leaf valid from %s to %s, want %s to %s", nb, na, fc.Now().Add(-5*time.Minute), fc.Now().Add(time.Hour))
	}
}

// TestServingRenewsAtTwoThirds: the issuer's own identity is reused until
// two thirds of its lifetime have passed on the clock.
func TestServingRenewsAtTwoThirds(t *testing.T) {
	t.Parallel()
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	is := newIssuer(t, fc, fake.NewClientset())
	s := is.NewServing(spiffeid.RequireFromSegments(td, "ns", "trellis-system", "sa", "trellis-cert-issuer"))
	first, err := s.GetX509SVID()
	if err != nil {
		t.Fatal(err)
	}
	fc.Step(40*time.Minute - time.Second)
	if again, _ := s.GetX509SVID(); again != first {
		t.Fatal("renewed before two thirds of the lifetime")
	}
	fc.Step(time.Second)
	renewed, err := s.GetX509SVID()
	if err != nil || renewed == first || !renewed.Certificates[0].NotAfter.Equal(fc.Now().Add(time.Hour)) {
		t.Fatalf("at two thirds of the lifetime: %v, want a new identity expiring at %s", err, fc.Now().Add(time.Hour))
	}
}

// TestTokenReviewsCachedOnTheClock: an agent's token review is reused for
// a minute, a refusal for five seconds.
func TestTokenReviewsCachedOnTheClock(t *testing.T) {
	t.Parallel()
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	client := fake.NewClientset()
	var reviews atomic.Int32
	client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reviews.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if tr.Spec.Token == "agent" {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "system:serviceaccount:trellis-system:trellis-cert-agent",
				Extra: map[string]authnv1.ExtraValue{NodeNameExtra: {"node-a"}}}}
		}
		return true, tr, nil
	})
	is := newIssuer(t, fc, client)
	for _, tc := range []struct {
		token string
		ttl   time.Duration
	}{{"agent", time.Minute}, {"garbage", 5 * time.Second}} {
		reviews.Store(0)
		check := func(when string, want int32) {
			t.Helper()
			_, _ = is.authenticate(context.Background(), tc.token)
			if got := reviews.Load(); got != want {
				t.Fatalf("token %q %s: %d reviews, want %d", tc.token, when, got, want)
			}
		}
		check("first", 1)
		fc.Step(tc.ttl - time.Second)
		check("just before its cache expires", 1)
		fc.Step(time.Second)
		check("when its cache expires", 2)
	}
}
