// Package wellknown holds the well-known names of the platform runtime: the
// labels, annotations, containers, volumes, paths and environment variables
// the controller puts on and into pods, and that the node daemons, the
// sidecars and the workloads read back, and the parser of the one structured
// value among them, the ports list. They are the contract between those
// parts, so they live here, below all of them, and the package imports
// nothing but the standard library: a sidecar that needs a path must not
// link the Kubernetes API machinery to get it.
package wellknown
