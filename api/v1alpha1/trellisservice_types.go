package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TrellisServiceSpec is a long-running stateless service.
// +kubebuilder:validation:XValidation:rule="!has(self.ingress) || self.ports.exists(p, p.name == self.ingress.port)",message="ingress.port must name one of ports"
type TrellisServiceSpec struct {
	// Service is the discovery name (ZooKeeper serverset and DNS); defaults
	// to the object's name.
	// +optional
	Service string `json:"service,omitempty"`
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32      `json:"replicas,omitempty"`
	Template PodTemplate `json:"template"`
	// +kubebuilder:validation:MinItems=1
	// +listType=map
	// +listMapKey=name
	Ports []Port `json:"ports"`
	// +kubebuilder:default={}
	// +optional
	Runtime Runtime `json:"runtime,omitempty"`
	// Ingress exposes one port over HTTP.
	// +optional
	Ingress *Ingress `json:"ingress,omitempty"`
	// MinAvailable is the PodDisruptionBudget's floor. Without it the budget
	// allows 25% of the pods (rounded up) to be disrupted at once.
	// +optional
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`
}

// Ingress routes a host and path to a port.
type Ingress struct {
	// +kubebuilder:validation:MinLength=1
	Host string `json:"host"`
	// +kubebuilder:default="/"
	// +optional
	Path string `json:"path,omitempty"`
	// Port names one of spec.ports.
	Port string `json:"port"`
	// +optional
	ClassName *string `json:"className,omitempty"`
}

// TrellisServiceStatus is the observed state of a TrellisService.
type TrellisServiceStatus struct {
	CommonStatus `json:",inline"`
	// +optional
	Replicas int32 `json:"replicas"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
}

// TrellisService is a long-running stateless service: a Deployment, a
// Service, a PodDisruptionBudget, a ConfigMap and optionally an Ingress.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas
// +kubebuilder:resource:shortName=tsvc,categories=trellis
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TrellisService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TrellisServiceSpec   `json:"spec"`
	Status TrellisServiceStatus `json:"status,omitempty"`
}

// TrellisServiceList is a list of TrellisServices.
//
// +kubebuilder:object:root=true
type TrellisServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrellisService `json:"items"`
}
