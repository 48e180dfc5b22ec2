// Package v1alpha1 holds the workload API of Trellis, group
// workloads.trellis.dev: users write their containers, the controller
// bundles the native resources and injects the platform runtime.
//
// +kubebuilder:object:generate=true
// +groupName=workloads.trellis.dev
package v1alpha1
