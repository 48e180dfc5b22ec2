package workloads

import (
	"bytes"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/gateway/api"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

var now = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func TestPrintGolden(t *testing.T) {
	web := api.Workload{Kind: "TrellisService", Namespace: "team-a", Name: "web", Generation: 4, ObservedGeneration: 4, Created: now.Add(-72 * time.Hour), Ready: "True"}
	batch := api.Workload{Kind: "TrellisJobSet", Namespace: "team-a", Name: "nightly", Generation: 2, ObservedGeneration: 1, Created: now.Add(-90 * time.Second), Ready: "False", Reason: "Progressing"}
	var b bytes.Buffer
	PrintList(&b, &api.WorkloadList{Items: []api.Workload{batch, web}}, now)
	b.WriteString("---\n")
	PrintStatus(&b, &api.Status{
		Workload:   web,
		Conditions: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "AllReplicasReady", Message: "3 of 3 ready"}},
		Pods: []api.Pod{
			{Name: "web-7d9c-abcde", Phase: "Running", Ready: true, Node: "node-1"},
			{Name: "web-7d9c-fghij", Phase: "Pending", Restarts: 2, Reason: "ImagePullBackOff"},
		},
		Events: []api.Event{{Time: now.Add(-5 * time.Minute), Type: "Normal", Reason: "Applied", Message: "Deployment web applied", Count: 1}},
	}, now)
	golden.Assert(t, "testdata/print.golden", b.Bytes())
}
