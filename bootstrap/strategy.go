package bootstrap

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// StrategyOverrides are what a user's flags change in the strategies a
// definition gives its groups.
type StrategyOverrides struct {
	// Groups to roll (default: every node group).
	Groups []string
	// MaxSurge and MaxUnavailable override every group's; -1 keeps them.
	MaxSurge, MaxUnavailable int
	Canary, PauseAfterCanary bool
	BakeTime                 time.Duration
}

// Strategies are the rollout strategies of def's node groups: the
// definition's maxSurge and maxUnavailable (a percentage of the group's
// minimum size: surge rounded up, unavailable down, as Kubernetes does),
// overridden by o.
func Strategies(def *definition.ClusterDefinition, o StrategyOverrides) (map[string]rollout.Strategy, error) {
	groups := map[string]rollout.Strategy{}
	for _, ig := range def.InstanceGroups {
		if len(o.Groups) > 0 && !slices.Contains(o.Groups, ig.Name) {
			continue
		}
		s, err := o.strategy(ig)
		if err != nil {
			return nil, fmt.Errorf("instance group %s: %w", ig.Name, err)
		}
		groups[ig.Name] = s
	}
	for _, g := range o.Groups {
		if _, ok := groups[g]; !ok {
			return nil, fmt.Errorf("no instance group %q", g)
		}
	}
	return groups, nil
}

func (o StrategyOverrides) strategy(ig definition.InstanceGroup) (rollout.Strategy, error) {
	size := 0
	if ig.MinSize != nil {
		size = int(*ig.MinSize)
	}
	surge, err := scaled(ig.MaxSurge, size, true)
	if err != nil {
		return rollout.Strategy{}, fmt.Errorf("maxSurge: %w", err)
	}
	unavailable, err := scaled(ig.MaxUnavailable, size, false)
	if err != nil {
		return rollout.Strategy{}, fmt.Errorf("maxUnavailable: %w", err)
	}
	if ig.MaxSurge == "" && ig.MaxUnavailable == "" {
		surge = max(1, size/10)
	}
	if o.MaxSurge >= 0 {
		surge = o.MaxSurge
	}
	if o.MaxUnavailable >= 0 {
		unavailable = o.MaxUnavailable
	}
	if surge > 0 {
		unavailable = 0 // surged batches keep every old node until its replacement passes
	}
	s := rollout.Strategy{MaxSurge: surge, MaxUnavailable: unavailable, Canary: o.Canary, PauseAfterCanary: o.PauseAfterCanary, BakeTime: o.BakeTime}
	return s, s.Validate()
}

func scaled(v string, size int, roundUp bool) (int, error) {
	if v == "" {
		return 0, nil
	}
	x := intstr.Parse(v)
	return intstr.GetScaledValueFromIntOrPercent(&x, size, roundUp)
}
