#!/usr/bin/env bash
# Builds the Karmada control plane's binaries from their Go module into a
# cache directory keyed by version, once, in a scratch module of their own:
# Karmada wants k8s.io v0.35 and controller-runtime v0.23, Trellis v0.36 and
# v0.24. The fleet's control plane runs them beside a stock kube-apiserver
# (Karmada's apiserver is one) from `make tools`. Prints the directory.
#
#   KARMADA_VERSION  (default: internal/versions/versions.env's)
#   TRELLIS_CACHE    cache root (default ~/.cache/trellis)
set -euo pipefail
source "$(dirname "$0")/lib/versions.sh"
source "$(dirname "$0")/lib/progress.sh"

CACHE=${TRELLIS_CACHE:-${HOME}/.cache/trellis}
BINARIES="karmada-aggregated-apiserver karmada-controller-manager karmada-scheduler karmada-webhook"
out="${CACHE}/karmada/${KARMADA_VERSION}"
mkdir -p "${out}"

missing=()
for b in ${BINARIES}; do
  [[ -x "${out}/${b}" ]] || missing+=("${b}")
done
if (( ${#missing[@]} > 0 )); then
  src="${CACHE}/src/karmada-${KARMADA_VERSION}"
  mkdir -p "${src}"
  cd "${src}"
  if [[ ! -f go.mod ]]; then
    step "Preparing a scratch module for Karmada ${KARMADA_VERSION}"
    printf 'module trellis.local/karmadabuild\n\ngo 1.26\n\nrequire github.com/karmada-io/karmada %s\n' "${KARMADA_VERSION}" > go.mod
  fi
  pkgs=()
  for b in "${missing[@]}"; do pkgs+=("github.com/karmada-io/karmada/cmd/${b#karmada-}"); done
  step_done
  # Each cmd's main package is named by its directory; -o into a directory
  # would name the binaries after it (controller-manager), so one by one.
  for b in "${missing[@]}"; do
    step "Building ${b} ${KARMADA_VERSION}"
    CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" -o "${out}/${b}" "github.com/karmada-io/karmada/cmd/${b#karmada-}" >&2
  done
  step_done
else
  cached "Karmada ${KARMADA_VERSION}"
fi
# The manifests the control plane applies come from the same module: every
# CRD (the controllers exit on a missing one) with the conversion patches,
# and the webhook configuration, whose URLs and CA the fleet fills in.
if [[ ! -f "${out}/manifests/webhook-configuration.yaml" ]]; then
  step "Copying Karmada ${KARMADA_VERSION}'s CRDs and webhook configuration"
  moddir=$(cd "${TMPDIR:-/tmp}" && go mod download -json "github.com/karmada-io/karmada@${KARMADA_VERSION}" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')
  rm -rf "${out}/manifests.tmp"
  mkdir -p "${out}/manifests.tmp"
  cp -r "${moddir}/charts/karmada/_crds" "${out}/manifests.tmp/crds"
  cp "${moddir}/artifacts/deploy/webhook-configuration.yaml" "${out}/manifests.tmp/"
  chmod -R u+w "${out}/manifests.tmp"
  rm -rf "${out}/manifests"
  mv "${out}/manifests.tmp" "${out}/manifests"
  step_done
fi
echo "${out}"
