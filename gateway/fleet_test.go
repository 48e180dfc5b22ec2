package gateway

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const goodPlacement = `apiVersion: fleet.trellis.dev/v1alpha1
kind: Placement
metadata: {name: web, namespace: team-a}
spec:
  workloads: [{kind: TrellisService, name: web}]
  spread: duplicated
`

func TestSplitPlacement(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		placed     bool
	}{
		{"workload alone", goodService, false},
		{"JSON", `{"kind":"Placement","apiVersion":"fleet.trellis.dev/v1alpha1"}`, false},
		{"workload then placement", goodService + "---\n" + goodPlacement, true},
		{"placement then workload", goodPlacement + "---\n" + goodService, true},
		{"two workloads", goodService + "---\n" + goodService, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, p := splitPlacement([]byte(tc.body))
			if (p != nil) != tc.placed {
				t.Fatalf("placement %q", p)
			}
			if !tc.placed {
				if string(w) != tc.body {
					t.Errorf("body changed: %q", w)
				}
				return
			}
			sub, probs := Decode(w)
			if probs != nil {
				t.Fatalf("the workload's documents do not decode: %v", probs)
			}
			if _, probs := decodePlacement(p, sub); probs != nil {
				t.Errorf("placement refused: %v", probs)
			}
		})
	}
}

// A placement's error names the line of the whole body.
func TestPlacementErrorNamesTheBodysLine(t *testing.T) {
	body := goodService + "---\n" + strings.Replace(goodPlacement, "spread: duplicated", "spread: everywhere", 1)
	w, p := splitPlacement([]byte(body))
	sub, probs := Decode(w)
	if probs != nil {
		t.Fatal(probs)
	}
	_, probs = decodePlacement(p, sub)
	line := strings.Count(goodService, "\n") + 1 + 6 // the separator, then the sixth line
	if len(probs) != 1 || !strings.Contains(probs[0].Message, "placement:"+strconv.Itoa(line)+":") {
		t.Errorf("want a problem at placement:%d, got %v", line, probs)
	}
}

func TestDecodePlacementPlacesTheWorkloadOnly(t *testing.T) {
	sub, _ := Decode([]byte(goodService))
	for _, tc := range []struct{ name, from, to, field string }{
		{"another workload", "name: web}]", "name: db}]", "Placement spec.workloads[0]"},
		{"every workload", "  workloads: [{kind: TrellisService, name: web}]\n", "", "Placement spec.workloads"},
		{"another namespace", "namespace: team-a}", "namespace: team-b}", "Placement metadata.namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, probs := decodePlacement([]byte(strings.Replace(goodPlacement, tc.from, tc.to, 1)), sub)
			if len(probs) == 0 || probs[0].Field != tc.field {
				t.Errorf("want a problem at %s, got %v", tc.field, probs)
			}
		})
	}
}

func TestMemberBoundsFollowTheSpread(t *testing.T) {
	var q frq
	q.Namespace, q.Name = "team-a", "trellis-quota"
	for _, m := range []string{"east", "west", "north"} {
		q.Spec.StaticAssignments = append(q.Spec.StaticAssignments, struct {
			ClusterName string              `json:"clusterName"`
			Hard        corev1.ResourceList `json:"hard"`
		}{m, corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("1")}})
	}
	q.Status.AggregatedStatus = append(q.Status.AggregatedStatus, struct {
		ClusterName string              `json:"clusterName"`
		Used        corev1.ResourceList `json:"used"`
	}{"west", corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("400m")}})
	demand := corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("900m")} // 3 replicas of 300m
	names := func(bs []bound) string {
		var out []string
		for _, b := range bs {
			h, u, n := b.rq.Spec.Hard[corev1.ResourceRequestsCPU], b.rq.Status.Used[corev1.ResourceRequestsCPU], b.new[corev1.ResourceRequestsCPU]
			out = append(out, b.rq.Name+" "+h.String()+"/"+u.String()+" needs "+n.String())
		}
		return strings.Join(out, "; ")
	}
	for _, tc := range []struct {
		name    string
		members []string
		mode    spreadMode
		weights map[string]int64
		want    string
	}{
		{"whole, two members", []string{"east", "west"}, spreadWhole, nil, "trellis-quota in member east 1/0 needs 900m; trellis-quota in member west 1/400m needs 900m"},
		{"weighted 2:1", []string{"east", "west"}, spreadWeighted, map[string]int64{"east": 2, "west": 1}, "trellis-quota in member east 1/0 needs 600m; trellis-quota in member west 1/400m needs 300m"},
		{"weighted, rounded up", []string{"east", "west"}, spreadWeighted, map[string]int64{"east": 1, "west": 1}, "trellis-quota in member east 1/0 needs 600m; trellis-quota in member west 1/400m needs 600m"},
		{"capacity, every member bounded", []string{"north", "east", "west"}, spreadCapacity, nil, "trellis-quota across members east, north, west 3/400m needs 900m"},
		{"capacity, one member unbounded", []string{"east", "south"}, spreadCapacity, nil, ""},
		{"no member selected", []string{}, spreadCapacity, nil, ""},
		{"whole, a member without an assignment", []string{"south"}, spreadWhole, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(memberBounds(q, tc.members, tc.mode, tc.weights, 3, demand, nil)); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
