package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Framework is a distributed-training framework.
// +kubebuilder:validation:Enum=TensorFlow;PyTorch
type Framework string

const (
	FrameworkTensorFlow Framework = "TensorFlow"
	FrameworkPyTorch    Framework = "PyTorch"
)

// ReplicaRole names a set of training replicas: Chief, Worker, PS
// (TensorFlow) or Master, Worker (PyTorch).
// +kubebuilder:validation:Enum=Chief;Worker;PS;Master
type ReplicaRole string

// ReplicaSpec is one role of a training job.
type ReplicaSpec struct {
	Role ReplicaRole `json:"role"`
	// +kubebuilder:validation:Minimum=1
	Replicas int32       `json:"replicas"`
	Template PodTemplate `json:"template"`
}

// CleanupPolicy says which pods remain after the job ends.
// +kubebuilder:validation:Enum=All;Running;None
type CleanupPolicy string

// TrellisTrainingJobSpec is a distributed training job.
// +kubebuilder:validation:XValidation:rule="self.framework != 'PyTorch' || self.replicaSpecs.exists_one(r, r.role == 'Master' && r.replicas == 1)",message="PyTorch jobs need exactly one Master replica"
// +kubebuilder:validation:XValidation:rule="self.framework != 'PyTorch' || self.replicaSpecs.all(r, r.role == 'Master' || r.role == 'Worker')",message="PyTorch roles are Master and Worker"
// +kubebuilder:validation:XValidation:rule="self.framework != 'TensorFlow' || self.replicaSpecs.all(r, r.role != 'Master')",message="TensorFlow roles are Chief, Worker and PS"
type TrellisTrainingJobSpec struct {
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="framework is immutable"
	Framework Framework `json:"framework"`
	// +kubebuilder:validation:MinItems=1
	// +listType=map
	// +listMapKey=role
	ReplicaSpecs []ReplicaSpec `json:"replicaSpecs"`
	// BackoffLimit is how often a failed replica restarts before the whole
	// job fails.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
	// +kubebuilder:default=Running
	// +optional
	CleanupPolicy CleanupPolicy `json:"cleanupPolicy,omitempty"`
	// Port the framework's processes talk on.
	// +kubebuilder:default=2222
	// +optional
	Port int32 `json:"port,omitempty"`
	// +kubebuilder:default={}
	// +optional
	Runtime Runtime `json:"runtime,omitempty"`
}

// TrellisTrainingJobStatus is the observed state of a TrellisTrainingJob.
type TrellisTrainingJobStatus struct {
	CommonStatus `json:",inline"`
	// +optional
	Active int32 `json:"active,omitempty"`
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
}

// TrellisTrainingJob runs TensorFlow or PyTorch replicas with a headless
// Service for stable hostnames.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ttj,categories=trellis
// +kubebuilder:printcolumn:name="Framework",type=string,JSONPath=`.spec.framework`
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.active`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TrellisTrainingJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TrellisTrainingJobSpec   `json:"spec"`
	Status TrellisTrainingJobStatus `json:"status,omitempty"`
}

// TrellisTrainingJobList is a list of TrellisTrainingJobs.
//
// +kubebuilder:object:root=true
type TrellisTrainingJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrellisTrainingJob `json:"items"`
}
