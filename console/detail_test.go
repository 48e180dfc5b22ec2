package console_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/gateway/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// detailStatus is what fakeAPI answers for a workload's status route.
var detailStatus = api.Status{
	Workload: api.Workload{Kind: "Service", Namespace: "team-a", Name: "web", Ready: "False", Reason: "PodsNotReady", Created: now.Add(-3 * time.Hour)},
	Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "PodsNotReady",
		Message: "1 of 2 pods ready", LastTransitionTime: metav1.NewTime(now.Add(-5 * time.Minute))}},
	Pods: []api.Pod{
		{Name: "web-0", Phase: "Running", Ready: true, Node: "node-a", Restarts: 0, Registered: "True",
			RegisteredMessage: "/discovery/web/prod/member_0000000001", Identity: "spiffe://trellis.local/ns/team-a/sa/web",
			IdentityNotBefore: now.Add(-20 * time.Minute), IdentityNotAfter: now.Add(45 * time.Minute)},
		{Name: "web-1", Phase: "Pending", Node: "node-b", Restarts: 3, Reason: "ImagePullBackOff", Registered: "False",
			RegisteredMessage: "not serving yet", Identity: "spiffe://trellis.local/ns/team-a/sa/web",
			IdentityNotBefore: now.Add(-60 * time.Minute), IdentityNotAfter: now.Add(5 * time.Minute)},
		{Name: "web-2", Phase: "Running", Node: "node-a", Identity: "spiffe://trellis.local/ns/team-a/sa/web",
			IdentityNotBefore: now.Add(-68 * time.Minute), IdentityNotAfter: now.Add(-3 * time.Minute)},
		{Name: "web-3", Phase: "Pending", Identity: "spiffe://trellis.local/ns/team-a/sa/web"},
	},
	Events: []api.Event{{Time: now.Add(-2 * time.Minute), Type: "Warning", Reason: "Failed", Message: "Back-off pulling image <x>", Count: 4}},
}

func TestWorkloadDetailShowsPodsAndEvents(t *testing.T) {
	c, _ := newConsole(t)
	ck, _ := signIn(t, c, "oidc:alice")
	resp := do(c, http.MethodGet, "/workloads/Service/web?namespace=team-a", ck, nil)
	for _, want := range []string{`id="p-web-1"`, "ImagePullBackOff", "Back-off pulling image &lt;x&gt;", "1 of 2 pods ready",
		`<span class="ready-True">True</span> <small>/discovery/web/prod/member_0000000001</small>`, "spiffe://trellis.local/ns/team-a/sa/web"} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, want) {
			t.Fatalf("detail: %d, want 200 with %q:\n%s", resp.StatusCode, want, resp.Body)
		}
	}
}

func TestWorkloadDetailRefusalIsShown(t *testing.T) {
	c, _ := newConsole(t)
	ck, _ := signIn(t, c, "oidc:bob")
	resp := do(c, http.MethodGet, "/workloads/Service/web?namespace=team-a", ck, nil)
	if resp.StatusCode != http.StatusForbidden || strings.Contains(resp.Body, "web-0") || !strings.Contains(resp.Body, "may not") {
		t.Fatalf("bob: %d, want 403 with the API's reason and no pod:\n%s", resp.StatusCode, resp.Body)
	}
	for _, bad := range []string{"/workloads/Serv%20ice/web", "/workloads/Service/Web_1"} {
		if r := do(c, http.MethodGet, bad+"?namespace=team-a", ck, nil); r.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, r.StatusCode)
		}
	}
}

// TestWorkloadDetailShowsIdentityExpiry: each pod's identity expiry is
// counted on the injected clock, with a warning when under a third of its
// lifetime is left (the sidecar renews at two thirds) and when expired.
func TestWorkloadDetailShowsIdentityExpiry(t *testing.T) {
	c, _ := newConsole(t)
	ck, _ := signIn(t, c, "oidc:alice")
	resp := do(c, http.MethodGet, "/workloads/Service/web?namespace=team-a", ck, nil)
	for pod, want := range map[string]string{
		"web-0": `<span class="cert-ok">expires in 45m</span> <small>2026-11-28 12:45 UTC</small>`,
		"web-1": `<span class="cert-warn">expires in 5m (renewal overdue)</span> <small>2026-11-28 12:05 UTC</small>`,
		"web-2": `<span class="cert-expired">expired 3m ago</span> <small>2026-11-28 11:57 UTC</small>`,
		"web-3": `<span>not recorded</span></td>`,
	} {
		row := regexp.MustCompile(`<tr id="p-` + pod + `">.*</tr>`).FindString(resp.Body)
		if !strings.Contains(row, want) {
			t.Errorf("%s: row %q, want %q", pod, row, want)
		}
	}
	if strings.Contains(resp.Body, "BEGIN") {
		t.Error("certificate material on the page")
	}
}
