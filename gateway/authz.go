package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"

	"github.com/trellis-dev/trellis/api/v1alpha1"
)

// ErrForbidden marks a caller the cluster's RBAC does not allow.
var ErrForbidden = errors.New("forbidden")

// AccessReviewer is the part of the Kubernetes client authz needs.
type AccessReviewer interface {
	Create(ctx context.Context, sar *authzv1.SubjectAccessReview, opts metav1.CreateOptions) (*authzv1.SubjectAccessReview, error)
}

// Authorizer asks the cluster's own RBAC (SubjectAccessReview) whether an
// identity may do a verb on a workload resource in a namespace, and keeps
// the answer briefly (allowed and denied for their own TTLs) in a bounded
// LRU cache: there is no second permission system.
type Authorizer struct {
	reviews AccessReviewer
	cache   *cache.LRUExpireCache
	// flight makes the callers of one question that is not cached wait
	// for one review: when a busy identity's decision expires, hundreds
	// of its requests in flight would otherwise each send one.
	flight            singleflight.Group
	allowTTL, denyTTL time.Duration
}

// NewAuthorizer caches decisions (at most size) for allowTTL / denyTTL.
func NewAuthorizer(r AccessReviewer, clock Clock, allowTTL, denyTTL time.Duration, size int) *Authorizer {
	return &Authorizer{reviews: r, cache: cache.NewLRUExpireCacheWithClock(size, clock), allowTTL: allowTTL, denyTTL: denyTTL}
}

type decision struct {
	allowed bool
	reason  string
}

// Authorize returns nil when id may do verb on resource (plural, in the
// workload group) in namespace, else an error wrapping ErrForbidden.
func (a *Authorizer) Authorize(ctx context.Context, id *Identity, namespace, resource, verb string) error {
	return a.AuthorizeGroup(ctx, id, namespace, v1alpha1.GroupVersion.Group, resource, verb)
}

// AuthorizeGroup is Authorize for a resource of any API group ("" is the
// core group: resourcequotas).
func (a *Authorizer) AuthorizeGroup(ctx context.Context, id *Identity, namespace, group, resource, verb string) error {
	key := cacheKey(id, namespace, group+"/"+resource, verb)
	if v, ok := a.cache.Get(key); ok {
		return v.(decision).err(id, namespace, resource, verb)
	}
	v, err, _ := a.flight.Do(key, func() (any, error) {
		if v, ok := a.cache.Get(key); ok {
			return v, nil
		}
		// Shared by every waiter: not cancelled with the first one's
		// request.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		return a.review(ctx, key, id, namespace, group, resource, verb)
	})
	if err != nil {
		return err
	}
	return v.(decision).err(id, namespace, resource, verb)
}

// reviewTimeout bounds a token or access review shared by many requests.
const reviewTimeout = 10 * time.Second

func (a *Authorizer) review(ctx context.Context, key string, id *Identity, namespace, group, resource, verb string) (decision, error) {
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range id.Extra {
		extra[k] = v
	}
	sar, err := a.reviews.Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: id.User, UID: id.UID, Groups: id.Groups, Extra: extra,
		ResourceAttributes: &authzv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: group, Resource: resource},
	}}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("subject access review failed: %w", err)
	}
	d := decision{allowed: sar.Status.Allowed && !sar.Status.Denied, reason: sar.Status.Reason}
	ttl := a.denyTTL
	if d.allowed {
		ttl = a.allowTTL
	}
	a.cache.Add(key, d, ttl)
	return d, nil
}

func (d decision) err(id *Identity, namespace, resource, verb string) error {
	if d.allowed {
		return nil
	}
	return fmt.Errorf("%w: %s may not %s %s in namespace %s", ErrForbidden, id.User, verb, resource, namespace)
}

func cacheKey(id *Identity, namespace, resource, verb string) string {
	h := sha256.New()
	groups := slices.Clone(id.Groups)
	slices.Sort(groups)
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", id.User, id.UID, strings.Join(groups, "\x01"))
	keys := make([]string, 0, len(id.Extra))
	for k := range id.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\x00", k, strings.Join(id.Extra[k], "\x01"))
	}
	fmt.Fprintf(h, "%s\x00%s\x00%s", namespace, resource, verb)
	return hex.EncodeToString(h.Sum(nil))
}
