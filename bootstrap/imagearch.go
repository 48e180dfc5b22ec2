package bootstrap

import (
	"errors"
	"fmt"
	"slices"

	"github.com/trellis-dev/trellis/bootstrap/definition"
)

// ErrImageArchitecture refuses an image for a group of another architecture.
var ErrImageArchitecture = errors.New("image architecture does not match the group's")

// CheckImageArchitecture refuses, before anything changes, an image whose
// EC2 architecture (x86_64, arm64) is not that of every group to roll onto
// it, such as an x86 AMI for a Graviton pool. groups empty means every node
// group.
func CheckImageArchitecture(def *definition.ClusterDefinition, groups []string, image, arch string) error {
	var errs []error
	for _, g := range def.InstanceGroups {
		if len(groups) > 0 && !slices.Contains(groups, g.Name) {
			continue
		}
		want := "x86_64"
		if g.Architecture == definition.ArchARM64 {
			want = "arm64"
		}
		if arch != want {
			errs = append(errs, fmt.Errorf("%w: instance group %s is %s (%s), image %s is %q", ErrImageArchitecture, g.Name, g.Architecture, g.MachineType, image, arch))
		}
	}
	return errors.Join(errs...)
}
