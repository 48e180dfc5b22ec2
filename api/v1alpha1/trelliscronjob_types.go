package v1alpha1

import (
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrellisCronJobSpec runs a job on a schedule with the same runtime support.
type TrellisCronJobSpec struct {
	// Schedule in cron format.
	// +kubebuilder:validation:MinLength=1
	Schedule string `json:"schedule"`
	// +optional
	TimeZone *string `json:"timeZone,omitempty"`
	// +kubebuilder:validation:Enum=Allow;Forbid;Replace
	// +kubebuilder:default=Forbid
	// +optional
	ConcurrencyPolicy batchv1.ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`
	// +kubebuilder:default=2
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
	// +optional
	Suspend  *bool       `json:"suspend,omitempty"`
	Template PodTemplate `json:"template"`
	// +kubebuilder:default={}
	// +optional
	Runtime Runtime `json:"runtime,omitempty"`
}

// TrellisCronJobStatus is the observed state of a TrellisCronJob.
type TrellisCronJobStatus struct {
	CommonStatus `json:",inline"`
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// +optional
	Active int32 `json:"active,omitempty"`
}

// TrellisCronJob becomes a CronJob.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tcj,categories=trellis
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TrellisCronJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TrellisCronJobSpec   `json:"spec"`
	Status TrellisCronJobStatus `json:"status,omitempty"`
}

// TrellisCronJobList is a list of TrellisCronJobs.
//
// +kubebuilder:object:root=true
type TrellisCronJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrellisCronJob `json:"items"`
}
