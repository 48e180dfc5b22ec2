// Package controlplane runs a real Kubernetes control plane on loopback:
// etcd and kube-apiserver, and on request kube-controller-manager and
// kube-scheduler, from the binaries `make tools` builds from the Kubernetes
// modules. Tests use it through internal/testutil/cluster; `make local` and
// benchmarks use it directly.
package controlplane
