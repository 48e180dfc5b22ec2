#!/usr/bin/env bash
# `make local`: a kind cluster wired like production, offline, from
# clusters/local.yaml: Docker and debootstrap set up for this host (hack/local-host.sh), the node
# image assembled once (`trellis local node-image`), the cluster created,
# the Trellis images loaded and the addon bundle applied (`trellis local
# up`), then the sample TrellisService run on it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "${root}/hack/lib/versions.sh"
cd "${root}"
start=$(date +%s)
kubectl="${TRELLIS_CACHE:-${HOME}/.cache/trellis}/k8s/${K8S_VERSION}/kubectl"
export KUBECONFIG="${TRELLIS_LOCAL_KUBECONFIG:-${HOME}/.kube/trellis-local.kubeconfig}"

./hack/local-host.sh
./bin/trellis local up -f clusters/local.yaml --kubeconfig "${KUBECONFIG}"

echo "==> Running the sample TrellisService (config/samples/)"
"${kubectl}" apply -f config/samples/
"${kubectl}" wait --for=condition=Ready trellisservice/hello --timeout=180s >/dev/null
"${kubectl}" get trellisservices,pods -o wide
echo
echo "make local took $(( $(date +%s) - start ))s. Use the cluster with:"
echo "  export KUBECONFIG=${KUBECONFIG}"
echo "  ${kubectl} get pods -A"
echo "Delete it with: ./bin/trellis local down -f clusters/local.yaml --kubeconfig ${KUBECONFIG}"
