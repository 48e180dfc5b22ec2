package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/trellis-dev/trellis/gateway/api"
	"k8s.io/apimachinery/pkg/util/validation"
)

func (c *Console) namespace(r *http.Request) (string, bool) {
	ns := r.FormValue("namespace")
	if ns == "" {
		ns = c.cfg.DefaultNamespace
	}
	return ns, len(validation.IsDNS1123Label(ns)) == 0
}

// workloads lists a namespace's workloads, if the API would.
func (c *Console) workloads(w http.ResponseWriter, r *http.Request, s *Session) {
	ns, ok := c.namespace(r)
	p := page{Session: s, Title: "Workloads", Nav: "workloads", Namespace: ns}
	if !ok {
		p.Message = "namespace " + ns + " is not a valid name"
		c.render(w, http.StatusBadRequest, "error", p)
		return
	}
	l := api.WorkloadList{}
	if c.get(w, r, s, &p, "/v1/namespaces/"+url.PathEscape(ns)+"/workloads", &l) {
		p.Data = l
		c.render(w, http.StatusOK, "workloads", p)
	}
}

// get reads target from the gateway's API as the signed-in user into out.
// When the API cannot be reached or refuses, it renders the error page
// with what the API said (what the API refuses, the page does not show)
// and returns false.
func (c *Console) get(w http.ResponseWriter, r *http.Request, s *Session, p *page, target string, out any) bool {
	code, apiErr, err := c.call(r, s, http.MethodGet, target, nil, out)
	switch {
	case err != nil:
		p.Message = err.Error()
		c.render(w, http.StatusBadGateway, "error", *p)
		return false
	case apiErr != nil:
		p.Title, p.Message = apiErr.Reason, apiErr.Message
		c.render(w, code, "error", *p)
		return false
	}
	return true
}

// watch streams the gateway's server-sent events for a namespace to the
// page: one informer-fed stream per tab, no polling of the apiserver.
func (c *Console) watch(w http.ResponseWriter, r *http.Request, s *Session) {
	ns, ok := c.namespace(r)
	if !ok {
		http.Error(w, "invalid namespace", http.StatusBadRequest)
		return
	}
	req := r.Clone(gatewayContext(r, s))
	req.URL = &url.URL{Path: "/v1/namespaces/" + ns + "/watch"}
	req.RequestURI = ""
	req.Pattern = ""
	c.cfg.API.ServeHTTP(w, req)
}

// submitView is the submit page's state.
type submitView struct {
	Body     string
	DryRun   bool
	Result   *api.SubmitResult
	Error    *api.Error
	Problems []api.Problem
}

func (c *Console) submitForm(w http.ResponseWriter, r *http.Request, s *Session) {
	c.render(w, http.StatusOK, "submit", page{Session: s, Title: "Submit", Nav: "submit", Data: submitView{}})
}

// submit runs the gateway's submit endpoint: a dry run (every check, with
// every problem and its field path) or the submission itself.
func (c *Console) submit(w http.ResponseWriter, r *http.Request, s *Session) {
	body := strings.TrimSpace(r.PostFormValue("workload"))
	v := submitView{Body: body, DryRun: r.PostFormValue("action") != "submit"}
	target := "/v1/workloads"
	if v.DryRun {
		target += "?" + api.QueryDryRun + "=true"
	}
	res := &api.SubmitResult{}
	code, apiErr, err := c.call(r, s, http.MethodPost, target, []byte(body), res)
	p := page{Session: s, Title: "Submit", Nav: "submit"}
	switch {
	case err != nil:
		p.Message = err.Error()
		code = http.StatusBadGateway
	case apiErr != nil:
		v.Error, v.Problems = apiErr, apiErr.Problems
	default:
		v.Result = res
	}
	p.Data = v
	c.render(w, code, "submit", p)
}
