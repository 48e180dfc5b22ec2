// Package health validates a running cluster against its definition: nodes
// Ready per instance group, control-plane and critical pods Ready, and every
// Trellis addon of the definition rolled out. It backs `trellis cluster
// validate`. kops's own validator needs the cloud's instance list; this one
// reads only the Kubernetes API, so it serves kind and AWS clusters alike.
package health
