#!/usr/bin/env bash
# Checks that the pinned tools built from Go modules (Kubernetes, etcd,
# CoreDNS, the kops CLI) select the module versions Trellis selects for
# every package they share with it (and Kubernetes's staging modules and
# etcd's own at exactly their release's versions), so that a cold build compiles each of
# those packages once (hack/lib/scratch.sh, docs/design/builds.md). It
# only resolves modules (go list), it builds nothing. On a mismatch it
# names the package's module, both versions, and the go get that aligns
# them; Trellis's go.mod is where the fix goes. Part of `make verify`.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
source "${root}/hack/lib/versions.sh"
source "${root}/hack/lib/scratch.sh"
source "${root}/hack/lib/coredns.sh"
cd "${root}"
export CGO_ENABLED=0 GOFLAGS=-mod=mod
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
format='{{if and (not .Standard) .Module}}{{.ImportPath}} {{.Module.Path}}@{{.Module.Version}}{{if .Module.Replace}}=>{{.Module.Replace.Path}}@{{.Module.Replace.Version}}{{end}}{{end}}'

# deps NAME DIR PACKAGES...: every non-standard package PACKAGES import, with
# its module's version, into ${work}/NAME.
deps() {
  local name=$1 dir=$2
  shift 2
  (cd "${dir}" && go list -deps -f "${format}" "$@") | sed '/^$/d' | sort >"${work}/${name}"
}

GOFLAGS= deps trellis "${root}" ./...

k8s_scratch_module "${work}/mod/k8s" "${K8S_VERSION}"
# shellcheck disable=SC2046 # one module per word
selected_exactly "${work}/mod/k8s" "v0.${K8S_VERSION#v*.}" $(k8s_staging_modules "${K8S_VERSION}")
deps kubernetes "${work}/mod/k8s" k8s.io/kubernetes/cmd/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl,kubelet,kubeadm,kube-proxy}

scratch_module "${work}/mod/etcd" trellis.local/etcdbuild "go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
selected_exactly "${work}/mod/etcd" "${ETCD_VERSION}" go.etcd.io/etcd/{server,api,client/pkg,client}/v3
deps etcd "${work}/mod/etcd" go.etcd.io/etcd/server/v3

scratch_module "${work}/mod/coredns" trellis.local/corednsbuild "github.com/coredns/coredns@${COREDNS_VERSION}"
pkgs=(github.com/coredns/coredns/coremain github.com/coredns/coredns/core/dnsserver)
for p in "${plugins[@]}"; do pkgs+=("github.com/coredns/coredns/plugin/${p#*:}"); done
deps coredns "${work}/mod/coredns" "${pkgs[@]}"

scratch_module "${work}/mod/kops" trellis.local/kopsbuild
deps kops "${work}/mod/kops" k8s.io/kops/cmd/kops

status=0
for tool in kubernetes etcd coredns kops; do
  # The packages both lists hold, by import path: same version or not.
  join "${work}/trellis" "${work}/${tool}" >"${work}/${tool}.joined"
  shared=$(wc -l <"${work}/${tool}.joined")
  total=$(wc -l <"${work}/${tool}")
  # One line per module: the versions Trellis and the tool select.
  differ=$(awk '$2 != $3 { print $2 " " $3 }' "${work}/${tool}.joined" | sort -u)
  if [[ -z "${differ}" ]]; then
    echo "shared-deps: ${tool}: ${shared} of its ${total} packages are Trellis's, all at Trellis's versions"
    continue
  fi
  status=1
  echo "shared-deps: ${tool}: packages it shares with Trellis at other versions; the build compiles them twice:" >&2
  while read -r ours theirs; do
    echo "  ${ours%%@*}: Trellis ${ours#*@}, ${tool} ${theirs#*@}" >&2
    # Trellis's requirements are the scratch module's roots, so the
    # tool's selection is the newer one (sort -V would rank a
    # pseudo-version above its release).
    echo "    align with: go get ${theirs}" >&2
  done <<<"${differ}"
done
exit "${status}"
