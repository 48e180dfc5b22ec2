package kindcluster

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/controller/inject"
)

// RuntimeImages lists the images a cluster with this addon bundle runs:
// every container image of the bundle's workloads, and the sidecar images
// the controller injects (its default runtime profile).
func RuntimeImages(rendered []addons.Rendered) []string {
	var out []string
	for _, r := range rendered {
		for _, o := range r.Objects {
			for _, path := range [][]string{{"spec", "template", "spec"}, {"spec", "jobTemplate", "spec", "template", "spec"}} {
				for _, kind := range []string{"containers", "initContainers"} {
					list, _, _ := unstructured.NestedSlice(o.Object, append(slices.Clone(path), kind)...)
					for _, c := range list {
						if m, ok := c.(map[string]any); ok {
							// The Kubernetes images of the node image (a
							// control plane an addon runs) are there.
							if img, ok := m["image"].(string); ok && img != "" && !strings.HasPrefix(img, render.KindImageRepository+"/") {
								out = append(out, img)
							}
						}
					}
				}
			}
		}
	}
	im := inject.DefaultProfile().Images
	out = append(out, im.ConfigInit, im.Traffic, im.Cert)
	slices.Sort(out)
	return slices.Compact(out)
}
