package console

import (
	"net/http"
	"net/url"

	"github.com/trellis-dev/trellis/gateway/api"
	"k8s.io/apimachinery/pkg/util/validation"
)

// workload shows one workload: its conditions, pods and recent events, as
// the gateway's status route answers them for the signed-in user. What the
// API refuses (no get on the workload, no list on pods or events) is shown
// as the API's refusal, never as an empty page.
func (c *Console) workload(w http.ResponseWriter, r *http.Request, s *Session) {
	ns, ok := c.namespace(r)
	kind, name := r.PathValue("kind"), r.PathValue("name")
	p := page{Session: s, Title: kind + " " + name, Nav: "workloads", Namespace: ns}
	if !ok || len(validation.IsDNS1123Subdomain(name)) != 0 || !validKind(kind) {
		p.Message = "namespace " + ns + ", kind " + kind + " or name " + name + " is not a valid name"
		c.render(w, http.StatusBadRequest, "error", p)
		return
	}
	st := api.Status{}
	if c.get(w, r, s, &p, "/v1/namespaces/"+url.PathEscape(ns)+"/workloads/"+url.PathEscape(kind)+"/"+url.PathEscape(name)+"/status", &st) {
		p.Data = st
		c.render(w, http.StatusOK, "workload", p)
	}
}

// validKind is a kind's spelling: letters only, as the gateway's kinds are.
func validKind(k string) bool {
	if k == "" || len(k) > 63 {
		return false
	}
	for _, r := range k {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return false
		}
	}
	return true
}
