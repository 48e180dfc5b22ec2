package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/governance/apfplan"
)

// AwaitClassified waits until each tenant's requests of every verb class
// are classified by the apiserver into the tenant's flow schema for the
// class (the response's X-Kubernetes-PF-FlowSchema-UID), for every tenant
// that has them: a delete and a get of a pod that does not exist, and a
// list. The apiserver adopts new flow schemas asynchronously (seconds on a
// busy machine); until then a tenant's requests land in other schemas.
func AwaitClassified(ctx context.Context, admin kubernetes.Interface, tenants map[string]*rest.Config, timeout time.Duration) error {
	schemas, err := admin.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	uids := map[string]string{}
	for _, fs := range schemas.Items {
		if _, c, ok := apfplan.ParseSchema(fs.Name); ok && c != "" {
			uids[fs.Name] = string(fs.UID)
		}
	}
	probes := map[apfplan.Class]struct{ method, path string }{
		apfplan.Mutating: {http.MethodDelete, "/pods/trellis-probe-absent"},
		apfplan.Read:     {http.MethodGet, "/pods/trellis-probe-absent"},
		apfplan.Watch:    {http.MethodGet, "/pods?limit=1"},
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for ns, cfg := range tenants {
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return err
		}
		for _, c := range apfplan.Classes {
			name := apfplan.SchemaName(ns, c)
			want, ok := uids[name]
			if !ok {
				continue
			}
			probe := probes[c]
			got := ""
			err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				req, err := http.NewRequestWithContext(ctx, probe.method, cfg.Host+"/api/v1/namespaces/"+ns+probe.path, nil)
				if err != nil {
					return false, err
				}
				resp, err := hc.Do(req)
				if err != nil {
					return false, nil
				}
				resp.Body.Close()
				got = resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")
				return got == want, nil
			})
			if err != nil {
				return fmt.Errorf("%s's %s %s requests are classified into flow schema %q, want %s's %q: %w", ns, c, probe.method, got, name, want, err)
			}
		}
	}
	return nil
}
