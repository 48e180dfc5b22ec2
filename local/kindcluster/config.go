// Package kindcluster runs the kind cluster of a local cluster definition
// (cloud: kind) with kind as a library: the configuration render.ToKind
// makes from the definition (as `trellis cluster render` prints it), plus
// what the node image needs (its kubeadm images).
package kindcluster

import (
	"fmt"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/local/nodeimage"
)

// Config renders the kind configuration of a local definition for a node
// image built with o: kubeadm is pointed at the images built into it.
func Config(def *definition.ClusterDefinition, image string, host render.HostQuirks, o nodeimage.Options) (*v1alpha4.Cluster, error) {
	c, err := render.ToKind(def, image, host)
	if err != nil {
		return nil, err
	}
	c.KubeadmConfigPatches = append(c.KubeadmConfigPatches, fmt.Sprintf(`kind: ClusterConfiguration
imageRepository: %s
etcd:
  local:
    imageTag: %q
dns:
  imageTag: %q
`, nodeimage.Repository, nodeimage.EtcdTag(o.EtcdVersion), o.CoreDNSVersion))
	return c, nil
}
