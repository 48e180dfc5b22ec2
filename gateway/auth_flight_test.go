package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// slowReviewFake answers every review after a pause, counting them: a
// test double for the apiserver's TokenReview and SubjectAccessReview.
type slowReviewFake struct{ calls atomic.Int32 }

func (f *slowReviewFake) pause() { f.calls.Add(1); time.Sleep(50 * time.Millisecond) }

func (f *slowReviewFake) Create(_ context.Context, sar *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	f.pause()
	sar.Status.Allowed = true
	return sar, nil
}

type slowTokenFake struct{ slowReviewFake }

func (f *slowTokenFake) Create(_ context.Context, tr *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	f.pause()
	tr.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences, User: authnv1.UserInfo{Username: "u"}}
	return tr, nil
}

// Many requests of one identity that miss the cache together (its
// decision just expired) cost one review each, not one per request; and
// one waiter's cancelled request does not fail the others.
func TestReviewsAreSharedByConcurrentRequests(t *testing.T) {
	const n = 50
	run := func(do func(ctx context.Context) error) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				if i == 0 {
					c, cancel := context.WithCancel(ctx)
					cancel()
					ctx = c
				}
				if err := do(ctx); err != nil && i != 0 {
					t.Errorf("request %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
	}
	sar := &slowReviewFake{}
	z := NewAuthorizer(sar, realClock{}, 10*time.Second, 5*time.Second, 10)
	run(func(ctx context.Context) error {
		return z.Authorize(ctx, &Identity{User: "u"}, "ns", "trellisservices", "get")
	})
	if c := sar.calls.Load(); c != 1 {
		t.Errorf("%d concurrent requests sent %d access reviews, want 1", n, c)
	}
	tok := &slowTokenFake{}
	a := NewAuthenticator(Authenticator{Reviews: tok, Audiences: []string{"trellis-gateway"}, Clock: realClock{}}, 10*time.Second, 10)
	run(func(ctx context.Context) error { _, err := a.token(ctx, "t"); return err })
	if c := tok.calls.Load(); c != 1 {
		t.Errorf("%d concurrent requests sent %d token reviews, want 1", n, c)
	}
}
