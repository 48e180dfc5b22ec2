package logshipper

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/trellis-dev/trellis/daemons/logshipper/sink"
)

// workload is the workload that owns p, from p alone: the shipper may
// only list and watch pods (its ClusterRole), so it never reads the
// owner. A ReplicaSet owner of a pod with a pod-template-hash label was
// made by a Deployment, named the ReplicaSet's name minus "-<hash>" (the
// Deployment controller's naming); any other controller owner is the
// workload itself. A pod without a controller has none (nil).
func workload(p *corev1.Pod) *sink.Workload {
	for _, o := range p.OwnerReferences {
		if o.Controller == nil || !*o.Controller {
			continue
		}
		if o.Kind == "ReplicaSet" && strings.HasPrefix(o.APIVersion, "apps/") {
			if hash := p.Labels["pod-template-hash"]; hash != "" {
				if name, ok := strings.CutSuffix(o.Name, "-"+hash); ok && name != "" {
					return &sink.Workload{Kind: "Deployment", Name: name}
				}
			}
		}
		return &sink.Workload{Kind: o.Kind, Name: o.Name}
	}
	return nil
}
