# Sourced by hack/build-{k8s,coredns,kops}.sh: the scratch modules that
# the pinned tools are built in start from Trellis's own go.mod and go.sum.
#
# Go's build cache keys a compiled package by its source, its flags and the
# compiled packages it imports. When the Kubernetes build selects exactly
# the module versions Trellis's build does (k8s.io/api, client-go,
# apimachinery, golang.org/x/net, protobuf, otel ...), with the same flags
# (CGO_ENABLED=0, no -trimpath), a package both compile is compiled once,
# by whichever builds first: about a third of cmd/...'s source, cold
# (docs/design/builds.md). hack/shared-deps.sh checks that it holds.
#
#   scratch_module DIR NAME [MODULE@VERSION ...]
#
# makes DIR a module named NAME with Trellis's requirements plus the given
# ones, replacing any go.mod already there (so a changed go.mod reaches it).

_scratch_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

scratch_module() {
  local dir=$1 name=$2
  shift 2
  mkdir -p "${dir}"
  cp "${_scratch_root}/go.mod" "${_scratch_root}/go.sum" "${dir}/"
  local args=(-module "${name}")
  local m
  for m in "$@"; do args+=(-require "${m}"); done
  (cd "${dir}" && go mod edit "${args[@]}")
}

# k8s_staging_edits VERSION prints the go mod edit flags that build
# k8s.io/kubernetes@VERSION from modules: it requires its staging modules
# at v0.<minor>.<patch> and points their v0.0.0 (what kubernetes's go.mod
# requires, and the proxy does not serve) there. The replacement names a
# version, not the module, so the selected module is the plain v0.x.y that
# Trellis's go.mod selects too: a replaced module is keyed differently in
# the build cache. The sample-* modules are not served, nor needed.
k8s_staging_edits() {
  local version=$1 gomod m
  gomod=$(go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
  grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "${gomod}" | awk '{print $1}' | grep -v 'k8s.io/sample-' |
    while read -r m; do
      echo "-require=${m}@v0.${version#v*.}"
      echo "-replace=${m}@v0.0.0=${m}@v0.${version#v*.}"
    done
}
