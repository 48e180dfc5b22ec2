package render

import (
	"bytes"
	"fmt"

	"k8s.io/kops/pkg/kopscodecs"
)

// YAML serialises the spec as `kops get -o yaml` prints it: the cluster, then
// each instance group, as kops.k8s.io/v1alpha2 documents.
func (s *Spec) YAML() ([]byte, error) {
	var buf bytes.Buffer
	b, err := kopscodecs.ToVersionedYaml(s.Cluster)
	if err != nil {
		return nil, fmt.Errorf("failed to serialise cluster %s: %w", s.Cluster.Name, err)
	}
	buf.Write(b)
	for _, ig := range s.InstanceGroups {
		b, err := kopscodecs.ToVersionedYaml(ig)
		if err != nil {
			return nil, fmt.Errorf("failed to serialise instance group %s: %w", ig.Name, err)
		}
		buf.WriteString("\n---\n\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}
