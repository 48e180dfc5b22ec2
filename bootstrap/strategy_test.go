package bootstrap

import (
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

func TestStrategyFromDefinition(t *testing.T) {
	ig := func(min int32, surge, unavailable string) definition.InstanceGroup {
		return definition.InstanceGroup{Name: "g", MinSize: &min, MaxSurge: surge, MaxUnavailable: unavailable}
	}
	for _, tc := range []struct {
		name                   string
		ig                     definition.InstanceGroup
		flagSurge, flagUnavail int
		want                   rollout.Strategy
		err                    string
	}{
		{"unset: 10% of the minimum, at least 1", ig(30, "", ""), -1, -1, rollout.Strategy{MaxSurge: 3}, ""},
		{"gpu: no surge, one unavailable", ig(8, "0", "1"), -1, -1, rollout.Strategy{MaxUnavailable: 1}, ""},
		{"percent surge rounds up", ig(10, "25%", "0"), -1, -1, rollout.Strategy{MaxSurge: 3}, ""},
		{"percent unavailable rounds down", ig(10, "0", "25%"), -1, -1, rollout.Strategy{MaxUnavailable: 2}, ""},
		{"flags win", ig(8, "0", "1"), 2, -1, rollout.Strategy{MaxSurge: 2}, ""},
		{"in place by flag", ig(8, "1", "0"), 0, 2, rollout.Strategy{MaxUnavailable: 2}, ""},
		{"no progress", ig(8, "0", "0"), -1, -1, rollout.Strategy{}, "both 0"},
		{"bad value", ig(8, "lots", "0"), -1, -1, rollout.Strategy{}, "maxSurge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := StrategyOverrides{MaxSurge: tc.flagSurge, MaxUnavailable: tc.flagUnavail}
			got, err := o.strategy(tc.ig)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestStrategiesNameUnknownGroups(t *testing.T) {
	min := int32(2)
	def := &definition.ClusterDefinition{InstanceGroups: []definition.InstanceGroup{{Name: "general", MinSize: &min}}}
	if _, err := Strategies(def, StrategyOverrides{Groups: []string{"gpu"}, MaxSurge: -1, MaxUnavailable: -1}); err == nil || !strings.Contains(err.Error(), `no instance group "gpu"`) {
		t.Fatalf("unknown group: %v", err)
	}
}
