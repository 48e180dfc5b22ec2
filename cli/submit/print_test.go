package submit

import (
	"bytes"
	"testing"

	"github.com/trellis-dev/trellis/gateway/api"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

func TestPrintGolden(t *testing.T) {
	checks := []api.CheckResult{{Name: "schema", Result: "passed"}, {Name: "validation", Result: "passed"}, {Name: "provenance", Result: "passed"},
		{Name: "signature", Result: "skipped"}, {Name: "quota", Result: "passed"}, {Name: "ratelimit", Result: "passed"}}
	var b bytes.Buffer
	Print(&b, &api.SubmitResult{Kind: "TrellisService", Namespace: "team-a", Name: "web", Action: "updated", ResourceVersion: "48213", FieldManager: "system:serviceaccount:team-a:ci", Checks: checks})
	Print(&b, &api.SubmitResult{Kind: "TrellisService", Namespace: "team-a", Name: "web", Action: "updated", DryRun: true, Checks: checks, Diff: "-replicas: 2\n+replicas: 3\n"})
	Print(&b, &api.SubmitResult{Kind: "TrellisService", Namespace: "team-a", Name: "web", Action: "unchanged", Replayed: true, SubmissionID: "build-812", ResourceVersion: "48213"})
	Print(&b, &api.SubmitResult{Kind: "TrellisService", Namespace: "team-a", Name: "web", Action: "created", ResourceVersion: "112", FieldManager: "system:serviceaccount:team-a:ci", Checks: checks,
		Placement: "team-a/trellis-web", Warnings: []string{"placed in the fleet: this gateway's reads show its own cluster, not the fleet"}})
	golden.Assert(t, "testdata/print.golden", b.Bytes())
}
