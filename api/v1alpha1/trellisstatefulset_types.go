package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TrellisStatefulSetSpec is a stateful service with stable identities.
type TrellisStatefulSetSpec struct {
	// +optional
	Service string `json:"service,omitempty"`
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32      `json:"replicas,omitempty"`
	Template PodTemplate `json:"template"`
	// +listType=map
	// +listMapKey=name
	// +optional
	Ports []Port `json:"ports,omitempty"`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="volumeClaimTemplates are immutable"
	// +optional
	VolumeClaimTemplates []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates,omitempty"`
	// +kubebuilder:default={}
	// +optional
	Runtime Runtime `json:"runtime,omitempty"`
	// +optional
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`
}

// TrellisStatefulSetStatus is the observed state of a TrellisStatefulSet.
type TrellisStatefulSetStatus struct {
	CommonStatus `json:",inline"`
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
}

// TrellisStatefulSet becomes a StatefulSet, a headless Service and a PDB.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tsts,categories=trellis
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TrellisStatefulSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TrellisStatefulSetSpec   `json:"spec"`
	Status TrellisStatefulSetStatus `json:"status,omitempty"`
}

// TrellisStatefulSetList is a list of TrellisStatefulSets.
//
// +kubebuilder:object:root=true
type TrellisStatefulSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrellisStatefulSet `json:"items"`
}
