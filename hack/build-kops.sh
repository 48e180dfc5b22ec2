#!/usr/bin/env bash
# Builds the real kops CLI from the pinned k8s.io/kops module into the cache,
# once, so tests can check that it reads what Trellis writes. Prints its path.
#
#   KOPS_VERSION  kops release (default: internal/versions/versions.env's, go.mod's k8s.io/kops)
#   TRELLIS_CACHE cache root (default ~/.cache/trellis)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
source "${root}/hack/lib/versions.sh"
source "${root}/hack/lib/progress.sh"
source "${root}/hack/lib/scratch.sh"
CACHE=${TRELLIS_CACHE:-${HOME}/.cache/trellis}
out="${CACHE}/kops/${KOPS_VERSION}/kops"

if [[ -x "${out}" ]]; then
  cached "kops ${KOPS_VERSION} CLI"
  echo "${out}"
  exit 0
fi

src="${CACHE}/src/kops-${KOPS_VERSION}"
mkdir -p "${src}" "$(dirname "${out}")"
cd "${src}"
# Trellis's own module graph (hack/lib/scratch.sh), so the CLI links the
# same versions the library does, and the packages both build (most of
# kops, the cloud SDKs) are compiled once.
scratch_module "${src}" trellis.local/kopsbuild
step "Building the kops ${KOPS_VERSION} CLI"
CGO_ENABLED=0 go build -mod=mod -o "${out}" k8s.io/kops/cmd/kops >&2
step_done
echo "${out}"
