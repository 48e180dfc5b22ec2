# Sourced by hack/build-{k8s,coredns,kops}.sh and hack/shared-deps.sh: the
# scratch modules that the pinned tools are built in start from Trellis's
# own go.mod and go.sum.
#
# Go's build cache keys a compiled package by its source, its flags, its
# module's selected version and the compiled packages it imports. When the
# Kubernetes build selects exactly the module versions Trellis's build does
# (k8s.io/api, client-go, apimachinery, golang.org/x/net, protobuf, otel
# ...), with the same flags (CGO_ENABLED=0, no -trimpath), a package both
# compile is compiled once, by whichever builds first: about a third of
# cmd/...'s dependencies, cold (docs/design/builds.md). hack/shared-deps.sh
# checks that it holds.

_scratch_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# scratch_module DIR NAME [MODULE@VERSION ...] makes DIR a module named NAME
# with Trellis's requirements plus the given ones, replacing any go.mod
# already there (so a changed go.mod reaches it). A replace by local path
# would not resolve from DIR, and a godebug line would change the tools'
# runtime defaults: go.mod with either is refused.
scratch_module() {
  local dir=$1 name=$2
  shift 2
  if grep -Eq '^\s*godebug\b|=>\s*\.{1,2}/|=>\s*/' "${_scratch_root}/go.mod"; then
    echo "scratch_module: ${_scratch_root}/go.mod has a godebug line or a replace by path; the tools' scratch modules copy go.mod and cannot take either (docs/design/builds.md)" >&2
    return 1
  fi
  mkdir -p "${dir}"
  cp "${_scratch_root}/go.mod" "${_scratch_root}/go.sum" "${dir}/"
  local args=(-module "${name}")
  local m
  for m in "$@"; do args+=(-require "${m}"); done
  (cd "${dir}" && go mod edit "${args[@]}")
}

# k8s_staging_modules VERSION prints the staging modules of
# k8s.io/kubernetes@VERSION (the ones its go.mod points at ./staging/),
# except sample-*, which the proxy does not serve and no command needs.
k8s_staging_modules() {
  local version=$1 json gomod
  json=$(go mod download -json "k8s.io/kubernetes@${version}") || {
    echo "k8s_staging_modules: cannot download k8s.io/kubernetes@${version}'s go.mod: ${json}" >&2
    return 1
  }
  gomod=$(sed -n 's/.*"GoMod": "\(.*\)",*/\1/p' <<<"${json}")
  grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "${gomod}" | awk '{print $1}' | grep -v 'k8s.io/sample-'
}

# k8s_scratch_module DIR VERSION: the scratch module for Kubernetes VERSION.
# Its staging modules are required at v0.<minor>.<patch>, and kubernetes's
# own requirement of them (v0.0.0, which the proxy does not serve) is
# replaced by that version; the selected version is then v0.<minor>.<patch>
# itself, as in Trellis's build.
k8s_scratch_module() {
  local dir=$1 version=$2 staging m
  staging=$(k8s_staging_modules "${version}")
  [[ -n "${staging}" ]] || { echo "k8s_scratch_module: no staging modules found in k8s.io/kubernetes@${version}'s go.mod" >&2; return 1; }
  local edits=()
  for m in ${staging}; do
    edits+=("-require=${m}@v0.${version#v*.}" "-replace=${m}@v0.0.0=${m}@v0.${version#v*.}")
  done
  scratch_module "${dir}" trellis.local/k8sbuild "k8s.io/kubernetes@${version}"
  (cd "${dir}" && go mod edit "${edits[@]}")
}

# selected_exactly DIR VERSION MODULE...: fails unless DIR's module graph
# selects each MODULE at VERSION. Trellis's go.mod is only a floor for a
# tool: a dependency of Trellis that wants a newer k8s.io/api (or etcd
# client) would otherwise compile Kubernetes (or etcd) against it, and
# etcd reports the version of its api module as its own.
selected_exactly() {
  local dir=$1 want=$2 m got
  shift 2
  for m in "$@"; do
    got=$(cd "${dir}" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' "${m}")
    if [[ "${got}" != "${want}" ]]; then
      echo "selected_exactly: ${m} is selected at ${got}, not ${want}: Trellis's go.mod (or a dependency of it) asks for another version; align go.mod with ${want} (docs/design/builds.md)" >&2
      return 1
    fi
  done
}
