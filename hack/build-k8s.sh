#!/usr/bin/env bash
# Builds real Kubernetes and etcd binaries from their Go modules into a cache
# directory keyed by version, once. Every test run and CI on the same machine
# reuses them. Prints the directory holding the binaries on stdout.
#
#   K8S_VERSION   Kubernetes release to build (default: internal/versions/versions.env's)
#   ETCD_VERSION  etcd release to build (default: internal/versions/versions.env's)
#   TRELLIS_CACHE cache root (default ~/.cache/trellis)
#   K8S_BINARIES  space-separated cmd names (default: control plane + node + kubectl)
set -euo pipefail
source "$(dirname "$0")/lib/versions.sh"
source "$(dirname "$0")/lib/progress.sh"
source "$(dirname "$0")/lib/scratch.sh"

CACHE=${TRELLIS_CACHE:-${HOME}/.cache/trellis}
K8S_BINARIES=${K8S_BINARIES:-"kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kubeadm kube-proxy"}

out="${CACHE}/k8s/${K8S_VERSION}"
mkdir -p "${out}"

missing=()
for b in ${K8S_BINARIES}; do
  [[ -x "${out}/${b}" ]] || missing+=("${b}")
done

ver=${K8S_VERSION#v}
major=${ver%%.*}
rest=${ver#*.}
minor=${rest%%.*}

if (( ${#missing[@]} > 0 )); then
  src="${CACHE}/src/kubernetes-${K8S_VERSION}"
  mkdir -p "${src}"
  cd "${src}"
  # Trellis's requirements plus Kubernetes (hack/lib/scratch.sh): the
  # packages both build are compiled once.
  step "Preparing a scratch module for Kubernetes ${K8S_VERSION}"
  k8s_scratch_module "${src}" "${K8S_VERSION}"
  # shellcheck disable=SC2046 # one module per word
  selected_exactly "${src}" "v0.${K8S_VERSION#v*.}" $(k8s_staging_modules "${K8S_VERSION}")
  ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X ${p}.gitVersion=${K8S_VERSION} -X ${p}.gitMajor=${major} -X ${p}.gitMinor=${minor}"
    ldflags+=" -X ${p}.gitTreeState=clean -X ${p}.buildDate=1970-01-01T00:00:00Z"
  done
  pkgs=()
  for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/${b}"); done
  step "Building Kubernetes ${K8S_VERSION}" "${missing[*]}; cold: ~10 min on 2 cores"
  # -mod=mod lets go add the requirements each command needs to the scratch
  # go.mod. No -trimpath: Trellis's build has none, and the flags are part
  # of a compiled package's cache key.
  CGO_ENABLED=0 go build -mod=mod -ldflags "${ldflags}" -o "${out}/" "${pkgs[@]}" >&2
  step_done
else
  cached "Kubernetes ${K8S_VERSION}"
fi

if [[ ! -x "${out}/etcd" ]]; then
  src="${CACHE}/src/etcd-${ETCD_VERSION}"
  mkdir -p "${src}"
  cd "${src}"
  scratch_module "${src}" trellis.local/etcdbuild "go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
  selected_exactly "${src}" "${ETCD_VERSION}" go.etcd.io/etcd/{server,api,client/pkg,client}/v3
  step "Building etcd ${ETCD_VERSION}"
  CGO_ENABLED=0 go build -mod=mod -ldflags "-s -w" -o "${out}/etcd" go.etcd.io/etcd/server/v3 >&2
  step_done
else
  cached "etcd ${ETCD_VERSION}"
fi

echo "${out}"
