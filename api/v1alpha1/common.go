package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodTemplate is the part of a pod users write: their containers and a few
// pod-level settings. The controller adds the runtime (init container,
// sidecars, identity env, volumes) and default resources.
type PodTemplate struct {
	// Labels and annotations added to every pod.
	// +optional
	Metadata PodMetadata `json:"metadata,omitempty"`
	// Containers of the workload. Each needs resource requests and limits
	// unless the runtime profile defaults them.
	// +kubebuilder:validation:MinItems=1
	// +listType=map
	// +listMapKey=name
	Containers []corev1.Container `json:"containers"`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// PodMetadata is the metadata users may set on pods.
type PodMetadata struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Runtime selects the platform runtime a workload gets. Everything is on by
// default; a workload opts out, never in.
type Runtime struct {
	// Discovery registers Ready pods in ZooKeeper under the service name.
	// +kubebuilder:default=true
	// +optional
	Discovery *bool `json:"discovery,omitempty"`
	// Identity gives every pod an mTLS certificate for its SPIFFE ID.
	// +kubebuilder:default=true
	// +optional
	Identity *bool `json:"identity,omitempty"`
	// Config is inline configuration, mounted at /etc/trellis/config.
	// +optional
	Config map[string]string `json:"config,omitempty"`
}

// Port is a named port the workload serves.
type Port struct {
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=15
	Name string `json:"name"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// +kubebuilder:validation:Enum=TCP;UDP
	// +kubebuilder:default=TCP
	// +optional
	Protocol corev1.Protocol `json:"protocol,omitempty"`
}

// Condition types every Trellis kind reports.
const (
	ConditionReady       = "Ready"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"
)

// CommonStatus is the status every kind shares.
type CommonStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// RuntimeProfile is the runtime profile revision the workload runs with.
	// +optional
	RuntimeProfile string `json:"runtimeProfile,omitempty"`
}
