// Package inject turns the pod a user wrote into the pod the platform runs:
// it adds the runtime every Trellis workload gets (config init container,
// traffic and certificate sidecars, identity env and volumes, labels and
// annotations) and applies the resource policy, all as pure functions of a
// cluster-level runtime profile, shared by every workload kind.
package inject
