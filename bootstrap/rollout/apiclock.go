package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/client-go/rest"
)

// ErrNoServerClock: the client cannot show the apiserver's responses (a
// fake clientset), so the apiserver's clock is unknown and no grant is
// finished.
var ErrNoServerClock = errors.New("the apiserver's clock is unknown: the client is not a REST client")

// serverBudgets lists a namespace's PodDisruptionBudgets together with the
// apiserver's clock at the read: the response's Date header.
//
// Why the Date header (docs/design/drain-grant.md): the budget's status and
// the time it is judged at come from one response of the apiserver, so the
// drain host's clock plays no part; the header is written after the list
// was read, so a grant's age is never understated (both the header and the
// grant are whole seconds: the error is under a second either way); it
// costs no write, no extra permission and nothing to clean up, where a
// fresh write's timestamp (an object's creationTimestamp or managedFields
// time) needs an object to write and the right to write it. Go's HTTP
// server, HTTP/1 and HTTP/2 alike, sets Date on every response; a response
// without one is refused.
//
// client-go's typed clients do not show a response's headers: the request
// is built by the policy/v1 REST client and sent with its HTTP client,
// which carries the kubeconfig's authentication, user agent and TLS.
func (k *KubeCluster) serverBudgets(ctx context.Context, ns string) ([]policyv1.PodDisruptionBudget, time.Time, error) {
	rc, ok := k.Client.PolicyV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		return nil, time.Time{}, ErrNoServerClock
	}
	u := rc.Get().Namespace(ns).Resource("poddisruptionbudgets").URL()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("failed to build the request for the disruption budgets in namespace %s: %w", ns, err)
	}
	req.Header.Set("Accept", "application/json")
	hc := rc.Client
	if hc == nil {
		hc = http.DefaultClient // as client-go does
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("failed to list the budgets of %s: %w", ns, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("failed to read the budgets of %s: %w", ns, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, time.Time{}, fmt.Errorf("failed to list the budgets of %s: %s: %.200s", ns, resp.Status, body)
	}
	now, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("the apiserver's list of the budgets of %s has no usable Date header (%q): %w", ns, resp.Header.Get("Date"), err)
	}
	var l policyv1.PodDisruptionBudgetList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, time.Time{}, fmt.Errorf("failed to decode the budgets of %s: %w", ns, err)
	}
	return l.Items, now, nil
}
