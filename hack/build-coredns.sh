#!/usr/bin/env bash
# Builds CoreDNS (the image kubeadm deploys for cluster DNS) from its Go
# module into the cache, once, for local node images. Prints the directory.
#   COREDNS_VERSION (default: internal/versions/versions.env's, what kubeadm deploys)
set -euo pipefail
source "$(dirname "$0")/lib/versions.sh"
source "$(dirname "$0")/lib/progress.sh"
CACHE=${TRELLIS_CACHE:-${HOME}/.cache/trellis}
out="${CACHE}/coredns/${COREDNS_VERSION}"
if [[ ! -x "${out}/coredns" ]]; then
  mkdir -p "${out}"
  step "Building CoreDNS ${COREDNS_VERSION}" "cold: ~3 min on 2 cores"
  CGO_ENABLED=0 GOBIN="${out}" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@${COREDNS_VERSION}" >&2
  step_done
else
  cached "CoreDNS ${COREDNS_VERSION}"
fi
echo "${out}"
