// Package definition loads, merges and validates Trellis cluster definitions
// (apiVersion trellis.dev/v1alpha1, kind ClusterDefinition): the short,
// versioned files under clusters/ that bootstrap renders into kops specs.
package definition
