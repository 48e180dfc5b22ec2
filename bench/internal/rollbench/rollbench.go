// Package rollbench holds what the rollout benches on the AWS API emulator
// share: the stored groups kops rolls, the calls counted at the emulator's
// proxy, and the check that a roll replaced every instance of a group.
package rollbench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/pkg/client/simple"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
	"github.com/trellis-dev/trellis/internal/awsemu"
)

// IntOrStr is n as a kops rolling-update setting.
func IntOrStr(n int) *intstr.IntOrString { v := intstr.FromInt32(int32(n)); return &v }

// Stored is cluster name as the state store holds it, for a kops rolling
// update of one group.
type Stored struct {
	Clientset simple.Clientset
	Spec      *render.Spec
	// All is every instance group; Rolled points at the one rolled in
	// All, with its rolling-update settings replaced.
	All    *kops.InstanceGroupList
	Rolled []*kops.InstanceGroup
}

// Load reads the stored cluster and instance groups and sets group's
// rolling-update settings to ru (nil: kops's defaults).
func Load(ctx context.Context, store, name, group string, ru *kops.RollingUpdate) (*Stored, error) {
	cs, err := statestore.Open(ctx, store)
	if err != nil {
		return nil, err
	}
	spec, err := bootstrap.Stored(ctx, cs, name)
	if err != nil {
		return nil, err
	}
	s := &Stored{Clientset: cs, Spec: spec, All: &kops.InstanceGroupList{}}
	for _, ig := range spec.InstanceGroups {
		s.All.Items = append(s.All.Items, *ig)
	}
	// The rolled group is the list's own object: kops tells a validation
	// failure of the rolled group from another group's by pointer, so the
	// cloud groups and the validator must share it (with copies, every
	// failure looked like another group's and kops never waited).
	for i := range s.All.Items {
		if ig := &s.All.Items[i]; ig.Name == group {
			ig.Spec.RollingUpdate = ru
			s.Rolled = append(s.Rolled, ig)
		}
	}
	if len(s.Rolled) == 0 {
		return nil, fmt.Errorf("%s has no instance group %s", name, group)
	}
	return s, nil
}

// ByAction sums the proxy's counted calls into cloud (EC2, Auto Scaling)
// and state store (S3) calls, and lists them by action, most first.
func ByAction(calls map[string]int) (cloud, store int, list string) {
	actions := slices.Sorted(maps.Keys(calls))
	slices.SortStableFunc(actions, func(a, b string) int { return calls[b] - calls[a] })
	var parts []string
	for _, a := range actions {
		if strings.HasPrefix(a, "S3:") {
			store += calls[a]
		} else {
			cloud += calls[a]
		}
		parts = append(parts, fmt.Sprintf("%s %d", a, calls[a]))
	}
	return cloud, store, strings.Join(parts, ", ")
}

// CheckReplaced: every instance of the group's ASG is new (none of
// before) and runs ami, and there are as many as before.
func CheckReplaced(ctx context.Context, c *awsemu.Clients, asg string, before []rollout.Instance, ami string) error {
	imgs, err := c.GroupImages(ctx, asg)
	if err != nil {
		return err
	}
	if len(imgs) != len(before) {
		return fmt.Errorf("%d instances after the roll, %d before", len(imgs), len(before))
	}
	for _, in := range before {
		if _, ok := imgs[in.ID]; ok {
			return fmt.Errorf("instance %s survived the roll", in.ID)
		}
	}
	for id, img := range imgs {
		if img != ami {
			return fmt.Errorf("instance %s runs %s, not %s", id, img, ami)
		}
	}
	return nil
}
