// Package certs is the home of pod identity certificates: issuer (the
// cluster signer), agent (the node agent that attests callers), attest
// (PID -> cgroup -> pod). The authority and its rotation are internal/pki's
// State, the wire format is internal/certsapi, and the sidecar lives in
// sidecars/certs. This package's tests run all of them together against a
// real apiserver, with workloads as real processes in cgroups the tests
// create (so they, and only they, import the sidecar).
package certs
