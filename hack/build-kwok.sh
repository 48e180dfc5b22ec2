#!/usr/bin/env bash
# Builds kwok (simulated nodes for `make bench-scale`) from its Go module into
# the cache, once, with the stage configuration it runs. Prints the directory.
#   KWOK_VERSION (default: internal/versions/versions.env's)
set -euo pipefail
source "$(dirname "$0")/lib/versions.sh"
source "$(dirname "$0")/lib/progress.sh"
CACHE=${TRELLIS_CACHE:-${HOME}/.cache/trellis}
out="${CACHE}/kwok/${KWOK_VERSION}"
if [[ ! -x "${out}/kwok" ]]; then
  mkdir -p "${out}"
  step "Building kwok ${KWOK_VERSION}"
  CGO_ENABLED=0 GOBIN="${out}" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}" >&2
  step_done
else
  cached "kwok ${KWOK_VERSION}"
fi
# kwok runs no stage it is not given: the "fast" set (nodes Ready at once
# with a lease heartbeat; pods Running at once, Job pods then completing).
if [[ ! -f "${out}/stages.yaml" ]]; then
  step "Copying kwok ${KWOK_VERSION}'s stages"
  src=$(go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"
    cat "${src}/kustomize/stage/${f}"
  done > "${out}/stages.yaml.tmp"
  mv "${out}/stages.yaml.tmp" "${out}/stages.yaml"
  step_done
fi
echo "${out}"
