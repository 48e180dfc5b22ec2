package render

import (
	"fmt"

	"k8s.io/kops/pkg/apis/kops/validation"
	"k8s.io/kops/upup/pkg/fi"
	"k8s.io/kops/util/pkg/vfs"
)

// Validate runs kops's own validation on a rendered spec: the cluster, each
// instance group against the cluster, and the cross-object checks of
// DeepValidate. cloud may be nil. strict requires a populated cluster spec
// (cloudup.PopulateClusterSpec), which the create path does before writing.
func Validate(s *Spec, strict bool, cloud fi.Cloud) error {
	if errs := validation.ValidateCluster(s.Cluster, strict, vfs.Context); len(errs) > 0 {
		return fmt.Errorf("kops rejected cluster %s: %w", s.Cluster.Name, errs.ToAggregate())
	}
	for _, ig := range s.InstanceGroups {
		errs := validation.ValidateInstanceGroup(ig, cloud, strict)
		errs = append(errs, validation.CrossValidateInstanceGroup(ig, s.Cluster, cloud, strict)...)
		if len(errs) > 0 {
			return fmt.Errorf("kops rejected instance group %s: %w", ig.Name, errs.ToAggregate())
		}
	}
	if err := validation.DeepValidate(s.Cluster, s.InstanceGroups, strict, vfs.Context, cloud); err != nil {
		return fmt.Errorf("kops rejected cluster %s: %w", s.Cluster.Name, err)
	}
	return nil
}
