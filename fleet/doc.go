// Package fleet runs Trellis workloads across a fleet of clusters on
// Karmada: it joins clusters from their definitions (push mode), reports
// the members' health and capacity, installs the fleet bundle (the
// workload CRDs and a ResourceInterpreterCustomization per kind, so
// Karmada divides, revises, retains, reflects and aggregates them and
// reads their health from the Ready condition), and renders Trellis
// placements into PropagationPolicies. Each member's own trellis-controller
// still translates the workloads and injects its cluster's runtime.
package fleet
