package issuer

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/certsapi"
	"github.com/trellis-dev/trellis/internal/pki"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// heldPatches holds every PATCH until release is closed, as an apiserver
// that stopped answering would: the rest of the traffic passes.
type heldPatches struct {
	next    http.RoundTripper
	held    chan struct{} // one value per PATCH that arrived
	release chan struct{}
}

func (h *heldPatches) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPatch {
		h.held <- struct{}{}
		<-h.release
	}
	return h.next.RoundTrip(r)
}

// TestIntegrationRecordsOffTheIssuancePath: with RecordValidities running,
// an issuance answers while the apiserver holds its pod's patch, and when
// two certificates are issued for one pod, the newest's dates are the ones
// left on the pod (one patch in flight per pod; a later record is never
// overwritten by an earlier one).
func TestIntegrationRecordsOffTheIssuancePath(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := cp.Client
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
	must(t, err)
	pod, err := admin.CoreV1().Pods("shop").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "web", Containers: []corev1.Container{{Name: "app", Image: "app"}}}}, metav1.CreateOptions{})
	must(t, err)

	hold := &heldPatches{held: make(chan struct{}, 16), release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(hold.release)
		}
	}()
	c := rest.CopyConfig(cp.Config)
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { hold.next = rt; return hold }
	client, err := kubernetes.NewForConfig(c)
	must(t, err)

	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	root, err := pki.NewRoot(td.Name(), 24*time.Hour, fc.Now())
	must(t, err)
	signer, err := pki.NewIntermediate(root, td.Name(), 12*time.Hour, fc.Now())
	must(t, err)
	is := New(Config{TrustDomain: td, Client: client, Clock: fc, TTL: 90 * time.Minute}, pki.NewState(root, signer))
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go is.RecordValidities(rctx, 2)
	for is.recorder.Load() == nil {
		time.Sleep(10 * time.Millisecond)
	}

	sign := func() string {
		t.Helper()
		done := make(chan string, 1)
		go func() {
			resp, err := is.Sign(ctx, "node-a", certsapi.SignRequest{Namespace: "shop", Name: "web-1", UID: string(pod.UID), CSR: newCSR(t)})
			if err != nil {
				t.Errorf("issuance failed: %v", err)
				done <- ""
				return
			}
			chain, err := pki.ParseCerts(resp.Chain)
			if err != nil {
				t.Errorf("the chain issued does not parse: %v", err)
				done <- ""
				return
			}
			done <- chain[0].NotAfter.UTC().Format(time.RFC3339)
		}()
		select {
		case na := <-done:
			return na
		case <-time.After(30 * time.Second):
			t.Fatalf("the issuance has not answered in 30 s while the apiserver holds its record's patch: the issuance path waits for the record")
			return ""
		}
	}
	first := sign()
	select {
	case <-hold.held:
	case <-time.After(30 * time.Second):
		t.Fatalf("no patch of the first certificate's record reached the apiserver")
	}
	fc.Step(10 * time.Minute)
	second := sign()
	if first == second || first == "" || second == "" {
		t.Fatalf("the two certificates end at %q and %q: want two different dates", first, second)
	}
	close(hold.release)
	released = true

	deadline := time.Now().Add(30 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		p, err := admin.CoreV1().Pods("shop").Get(ctx, "web-1", metav1.GetOptions{})
		must(t, err)
		got = p.Annotations[wellknown.AnnotationIdentityNotAfter]
		if got == second && is.Records() == 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got != second {
		t.Fatalf("the pod says its identity ends at %q; want the newest certificate's %s (the first ended at %s)", got, second, first)
	}
	if n := is.Records(); n != 2 {
		t.Errorf("%d records written, want 2 (the held one and the newest)", n)
	}
	t.Logf("the pod's record is the newest certificate's (%s), %d records written", second, is.Records())
}
