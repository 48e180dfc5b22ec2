// Package cluster starts a real Kubernetes control plane for tests: etcd and
// kube-apiserver (and, on request, kube-controller-manager and
// kube-scheduler) built from the Kubernetes modules by `make tools`, on
// random loopback ports, stopped in order when the test ends.
package cluster
