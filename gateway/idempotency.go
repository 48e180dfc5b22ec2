package gateway

import (
	"context"
	"fmt"
	"regexp"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/gateway/api"
)

var submissionIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func validSubmissionID(id string) string {
	if !submissionIDRE.MatchString(id) {
		return fmt.Sprintf("submission id %q: want 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	return ""
}

// resultCache keeps the first result of each submission id this replica
// answered (an hour, at most 10,000).
type resultCache struct {
	c *cache.LRUExpireCache
}

type firstResult struct {
	digest string
	res    api.SubmitResult
}

func newResultCache(clock Clock) *resultCache {
	return &resultCache{c: cache.NewLRUExpireCacheWithClock(10000, clock)}
}

func (r *resultCache) put(ns, id, digest string, res *api.SubmitResult) {
	r.c.Add(ns+"/"+id, firstResult{digest: digest, res: *res}, time.Hour)
}

// previous returns the first result of submission id in ns when it had
// this digest, or a conflict message when it had another. It knows the
// ids this replica answered, and, from the cache, the id each workload
// was last written with (by any replica, before any restart).
func (g *Gateway) previous(ctx context.Context, ns, id, digest string) (*api.SubmitResult, string) {
	if v, ok := g.results.c.Get(ns + "/" + id); ok {
		f := v.(firstResult)
		if f.digest != digest {
			return nil, conflict(id, f.res.Kind, ns, f.res.Name)
		}
		return &f.res, ""
	}
	for _, k := range kinds {
		list := k.NewList()
		if err := g.cache.List(ctx, list, client.InNamespace(ns), client.MatchingFields{indexSubmissionID: id}); err != nil {
			continue
		}
		objs, _ := extractObjects(list)
		for _, o := range objs {
			if o.GetAnnotations()[api.AnnotationSubmissionDigest] != digest {
				return nil, conflict(id, k.Kind, ns, o.GetName())
			}
			return &api.SubmitResult{
				Kind: k.Kind, Namespace: ns, Name: o.GetName(), ResourceVersion: o.GetResourceVersion(),
				Generation: o.GetGeneration(), Action: api.ActionUnchanged, SubmissionID: id,
			}, ""
		}
	}
	return nil, ""
}

func conflict(id, kind, ns, name string) string {
	return fmt.Sprintf("submission id %q was used for a different body (%s %s/%s): use a new id for a new submission", id, kind, ns, name)
}

// previousInFleet is previous for a placed submission: the ids this
// replica answered, then the fleet's workloads of the namespace, whose
// annotations carry the id and digest they were last written with (by
// any replica, before any restart). The fleet has no cache here, so
// this lists each kind once.
func (g *Gateway) previousInFleet(ctx context.Context, ns, id, digest string, nsInFleet bool) (*api.SubmitResult, string, error) {
	if v, ok := g.results.c.Get(fleetKey(ns) + "/" + id); ok {
		f := v.(firstResult)
		if f.digest != digest {
			return nil, conflict(id, f.res.Kind, ns, f.res.Name), nil
		}
		return &f.res, "", nil
	}
	if !nsInFleet {
		return nil, "", nil
	}
	for _, k := range kinds {
		list, err := g.fleet.Resource(k.GVR()).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, "", fmt.Errorf("failed to look up submission id %q in the fleet: %w", id, err)
		}
		for _, o := range list.Items {
			a := o.GetAnnotations()
			if a[api.AnnotationSubmissionID] != id {
				continue
			}
			if a[api.AnnotationSubmissionDigest] != digest {
				return nil, conflict(id, k.Kind, ns, o.GetName()), nil
			}
			return &api.SubmitResult{
				Kind: k.Kind, Namespace: ns, Name: o.GetName(), ResourceVersion: o.GetResourceVersion(),
				Generation: o.GetGeneration(), Action: api.ActionUnchanged, SubmissionID: id,
			}, "", nil
		}
	}
	return nil, "", nil
}
