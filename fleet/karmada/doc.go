// Package karmada runs the fleet's control plane, Karmada, on loopback:
// its apiserver (a stock kube-apiserver with the aggregation layer, beside
// etcd and a kube-controller-manager for garbage collection and namespaces,
// from internal/controlplane), karmada-aggregated-apiserver (the only
// server of cluster.karmada.io), karmada-webhook, karmada-scheduler and
// karmada-controller-manager, from the binaries hack/build-karmada.sh
// builds once into the cache, with the CRDs and webhook configuration of
// the same Karmada version. Tests, benchmarks and `trellis fleet local`
// use it; in production the same components run on a management cluster.
package karmada
