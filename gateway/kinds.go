package gateway

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
)

// workloadKind is one of the six kinds the gateway takes.
type workloadKind struct {
	Kind     string
	Resource string
	New      func() client.Object
	NewList  func() client.ObjectList
}

// GVR is the kind's group, version and resource.
func (k workloadKind) GVR() schema.GroupVersionResource {
	return v1alpha1.GroupVersion.WithResource(k.Resource)
}

var kinds = []workloadKind{
	{"TrellisService", "trellisservices", func() client.Object { return &v1alpha1.TrellisService{} }, func() client.ObjectList { return &v1alpha1.TrellisServiceList{} }},
	{"TrellisJobSet", "trellisjobsets", func() client.Object { return &v1alpha1.TrellisJobSet{} }, func() client.ObjectList { return &v1alpha1.TrellisJobSetList{} }},
	{"TrellisCronJob", "trelliscronjobs", func() client.Object { return &v1alpha1.TrellisCronJob{} }, func() client.ObjectList { return &v1alpha1.TrellisCronJobList{} }},
	{"TrellisDaemon", "trellisdaemons", func() client.Object { return &v1alpha1.TrellisDaemon{} }, func() client.ObjectList { return &v1alpha1.TrellisDaemonList{} }},
	{"TrellisTrainingJob", "trellistrainingjobs", func() client.Object { return &v1alpha1.TrellisTrainingJob{} }, func() client.ObjectList { return &v1alpha1.TrellisTrainingJobList{} }},
	{"TrellisStatefulSet", "trellisstatefulsets", func() client.Object { return &v1alpha1.TrellisStatefulSet{} }, func() client.ObjectList { return &v1alpha1.TrellisStatefulSetList{} }},
}

// kindByName finds a kind by its name, its plural resource or either in
// lower case.
func kindByName(s string) (workloadKind, bool) {
	for _, k := range kinds {
		if strings.EqualFold(s, k.Kind) || strings.EqualFold(s, k.Resource) {
			return k, true
		}
	}
	return workloadKind{}, false
}

func kindNames() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.Kind
	}
	return out
}
