package console_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestWorkloadsShowLastEvent: a workload's most recent event is in its
// row, its message clipped (whole in the title); a caller the API does not
// let list events sees the refusal instead of events.
func TestWorkloadsShowLastEvent(t *testing.T) {
	c, _ := newConsole(t)
	alice, _ := signIn(t, c, "oidc:alice")
	erin, _ := signIn(t, c, "oidc:erin")
	r := do(c, http.MethodGet, "/workloads?namespace=team-a", alice, nil)
	for _, want := range []string{
		`<span class="event-Warning">FailedScheduling</span>: <span title="0/6 nodes are available: 3 Insufficient cpu, 3 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }">0/6 nodes are available: 3 Insufficient cpu, 3 node(s) had untolerated taint {n…</span> <small>40s ago</small>`,
		`<td>1m</td><td><span class="event-Warning">`, `<td>3h</td><td>none</td>`,
	} {
		if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, want) {
			t.Fatalf("alice: %d, want 200 with %q:\n%s", r.StatusCode, want, r.Body)
		}
	}
	r = do(c, http.MethodGet, "/workloads?namespace=team-a", erin, nil)
	if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, "nightly") || strings.Contains(r.Body, "FailedScheduling") ||
		strings.Count(r.Body, "<td>not allowed</td>") != 2 || !strings.Contains(r.Body, "Last events are not shown: forbidden: oidc:erin may not list events") {
		t.Fatalf("erin: %d, want 200 with the workloads, the refusal to list events and no event:\n%s", r.StatusCode, r.Body)
	}
}
