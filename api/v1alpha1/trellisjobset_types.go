package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrellisJobSetSpec is N parallel jobs of the same container, each owning
// one shard. Each shard's job gets TRELLIS_SHARD_INDEX and
// TRELLIS_SHARD_COUNT, its own ConfigMap rendered from ShardConfig, and its
// own volumes from VolumeClaimTemplates.
type TrellisJobSetSpec struct {
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="shards is immutable"
	Shards int32 `json:"shards"`
	// Parallelism bounds how many shards run at once (default: all).
	// +kubebuilder:validation:Minimum=1
	// +optional
	Parallelism *int32 `json:"parallelism,omitempty"`
	// BackoffLimit is each shard's retry limit.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +optional
	BackoffLimit *int32      `json:"backoffLimit,omitempty"`
	Template     PodTemplate `json:"template"`
	// ShardConfig is a Go template per file, rendered per shard with
	// .Index and .Count, mounted at /etc/trellis/shard.
	// +optional
	ShardConfig map[string]string `json:"shardConfig,omitempty"`
	// +optional
	VolumeClaimTemplates []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates,omitempty"`
	// +kubebuilder:default={}
	// +optional
	Runtime Runtime `json:"runtime,omitempty"`
	// TTLSecondsAfterFinished garbage-collects finished jobs (default from the profile).
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// TrellisJobSetStatus counts shards by state.
type TrellisJobSetStatus struct {
	CommonStatus `json:",inline"`
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// +optional
	Running int32 `json:"running,omitempty"`
}

// TrellisJobSet runs one Job per shard.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tjs,categories=trellis
// +kubebuilder:printcolumn:name="Shards",type=integer,JSONPath=`.spec.shards`
// +kubebuilder:printcolumn:name="Succeeded",type=integer,JSONPath=`.status.succeeded`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TrellisJobSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TrellisJobSetSpec   `json:"spec"`
	Status TrellisJobSetStatus `json:"status,omitempty"`
}

// TrellisJobSetList is a list of TrellisJobSets.
//
// +kubebuilder:object:root=true
type TrellisJobSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrellisJobSet `json:"items"`
}
