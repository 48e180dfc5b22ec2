#!/usr/bin/env bash
# `make local`: a kind cluster wired like production, offline, from
# clusters/local.yaml: Docker and debootstrap set up for this host
# (hack/local-host.sh) and the debootstrap rootfs made (hack/rootfs), both
# while the binaries compile (`make tools-node build`);
# then the node image assembled once (`trellis local node-image`), the
# cluster created, the Trellis images loaded and the addon bundle applied
# (`trellis local up`), then the sample TrellisService run on it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "${root}/hack/lib/versions.sh"
cd "${root}"
start=$(date +%s)
kubectl="${TRELLIS_CACHE:-${HOME}/.cache/trellis}/k8s/${K8S_VERSION}/kubectl"
export KUBECONFIG="${TRELLIS_LOCAL_KUBECONFIG:-${HOME}/.kube/trellis-local.kubeconfig}"

# The host's setup and the two debootstrap rootfs (the node's, ZooKeeper's)
# wait on apt's mirror and the disk; the compiles wait on the CPU. They run
# side by side, and `trellis local up` then finds the rootfs made.
mkdir -p _output/local bin
prep_log=_output/local/prepare.log
go build -o bin/rootfs ./hack/rootfs
# In a session of its own, so that stopping make local stops it all.
setsid bash -c './hack/local-host.sh && ./bin/rootfs' >"${prep_log}" 2>&1 &
prep=$!
trap 'kill -- "-${prep}" 2>/dev/null || true' EXIT
echo "==> Preparing the host and the rootfs beside the build (log: ${prep_log})"
"${MAKE:-make}" tools-node build
if ! wait "${prep}"; then
  cat "${prep_log}" >&2
  echo "make local: preparing the host or the rootfs failed (log above); run make local again" >&2
  exit 1
fi
trap - EXIT
grep -E '^(==>| ✓)' "${prep_log}" || true
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
