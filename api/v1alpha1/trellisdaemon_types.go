package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrellisDaemonSpec is an infrastructure daemon on every (selected) node.
// Only namespaces the controller is configured to allow may run them.
type TrellisDaemonSpec struct {
	Template PodTemplate `json:"template"`
	// +kubebuilder:default={}
	// +optional
	Runtime Runtime `json:"runtime,omitempty"`
	// MaxUnavailable during rollouts (default 1).
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxUnavailable *int32 `json:"maxUnavailable,omitempty"`
}

// TrellisDaemonStatus is the observed state of a TrellisDaemon.
type TrellisDaemonStatus struct {
	CommonStatus `json:",inline"`
	// +optional
	DesiredNumberScheduled int32 `json:"desiredNumberScheduled,omitempty"`
	// +optional
	NumberReady int32 `json:"numberReady,omitempty"`
}

// TrellisDaemon becomes a DaemonSet.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tdm,categories=trellis
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredNumberScheduled`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.numberReady`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TrellisDaemon struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TrellisDaemonSpec   `json:"spec"`
	Status TrellisDaemonStatus `json:"status,omitempty"`
}

// TrellisDaemonList is a list of TrellisDaemons.
//
// +kubebuilder:object:root=true
type TrellisDaemonList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrellisDaemon `json:"items"`
}
