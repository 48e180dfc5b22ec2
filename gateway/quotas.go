package gateway

import (
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/gateway/api"
	"github.com/trellis-dev/trellis/governance/quota"
)

// quotas lists a namespace's ResourceQuotas and their usage from the
// cache, for a caller who may list resourcequotas (core group) there.
func (g *Gateway) quotas(w http.ResponseWriter, r *http.Request) {
	q := g.newRequest(w, r, "quotas")
	if !q.authenticate() {
		return
	}
	ns := r.PathValue("namespace")
	if !q.authorizeCore(ns, "resourcequotas", "list") {
		return
	}
	l := &corev1.ResourceQuotaList{}
	if err := g.cache.List(r.Context(), l, client.InNamespace(ns)); err != nil {
		q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
		return
	}
	out := api.QuotaList{Items: []api.Quota{}}
	for _, rq := range l.Items {
		item := api.Quota{Name: rq.Name, Hard: map[string]string{}, Used: map[string]string{}, Schedule: rq.Annotations[quota.AnnotationSchedule]}
		for k, v := range rq.Spec.Hard {
			item.Hard[string(k)] = v.String()
		}
		for k, v := range rq.Status.Used {
			item.Used[string(k)] = v.String()
		}
		out.Items = append(out.Items, item)
	}
	slices.SortFunc(out.Items, func(a, b api.Quota) int { return strings.Compare(a.Name, b.Name) })
	q.ok(http.StatusOK, out)
}
