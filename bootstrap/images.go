package bootstrap

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/upup/pkg/fi/cloudup/awsup"
)

// ErrUnknownImages is returned when images of a definition's groups cannot
// be found in the cloud.
var ErrUnknownImages = errors.New("images not found in the cloud")

// checkImages resolves every distinct image of the groups in the cloud and
// names all that cannot be resolved, with their groups, in one error:
// kops's own validation stops at the first group it refuses.
func checkImages(igs []*kops.InstanceGroup, cloud awsup.AWSCloud) error {
	groups := map[string][]string{}
	var order []string
	for _, ig := range igs {
		img := ig.Spec.Image
		if img == "" {
			continue
		}
		if _, ok := groups[img]; !ok {
			order = append(order, img)
		}
		groups[img] = append(groups[img], ig.Name)
	}
	var bad []string
	for _, img := range order {
		if _, err := cloud.ResolveImage(img); err != nil {
			bad = append(bad, fmt.Sprintf("%s (groups %s): %v", img, strings.Join(groups[img], ", "), err))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d of %d:\n  %s", ErrUnknownImages, len(bad), len(order), strings.Join(bad, "\n  "))
}
