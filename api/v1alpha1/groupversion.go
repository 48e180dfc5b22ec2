package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of the Trellis workload kinds.
	GroupVersion = schema.GroupVersion{Group: "workloads.trellis.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers every kind and its list; a new kind is added here.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&TrellisCronJob{}, &TrellisCronJobList{},
		&TrellisDaemon{}, &TrellisDaemonList{},
		&TrellisJobSet{}, &TrellisJobSetList{},
		&TrellisService{}, &TrellisServiceList{},
		&TrellisStatefulSet{}, &TrellisStatefulSetList{},
		&TrellisTrainingJob{}, &TrellisTrainingJobList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
