#!/usr/bin/env bash
# Builds CoreDNS (the image kubeadm deploys for cluster DNS) from its Go
# module into the cache, once, for local node images. Prints the directory.
#   COREDNS_VERSION (default v1.14.2, what kubeadm v1.36 deploys)
set -euo pipefail
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.2}
CACHE=${TRELLIS_CACHE:-${HOME}/.cache/trellis}
out="${CACHE}/coredns/${COREDNS_VERSION}"
if [[ ! -x "${out}/coredns" ]]; then
  mkdir -p "${out}"
  echo "build-coredns: building coredns ${COREDNS_VERSION} (cold: ~3 min on 2 cores)" >&2
  CGO_ENABLED=0 GOBIN="${out}" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@${COREDNS_VERSION}" >&2
fi
echo "${out}"
