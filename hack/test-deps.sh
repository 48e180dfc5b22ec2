#!/usr/bin/env bash
# Checks what `make test` needs beyond Go and `make tools`: the programs the
# tests run (openssl, ip, iptables, ZooKeeper on Java, python3-kazoo,
# Prometheus, chromium, and moto, the AWS API emulator). As root with apt-get it installs the missing Debian packages;
# otherwise it fails at once, naming every missing package and the command
# that installs them. `make test`, `make test-integration` and .ci/run call it.
#
#   hack/test-deps.sh          check, and install what is missing (root + apt-get)
#   hack/test-deps.sh --check  check only
#
# moto (moto_server, Python) is not a Debian package and there is no PyPI
# here, so it is only checked: the test machines have it under pyenv.
set -euo pipefail

install=1
for arg in "$@"; do
  case "${arg}" in
    --check) install=0 ;;
    --aws) ;; # moto is always checked now; kept for old callers
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
  esac
done

# have CMD: CMD is on PATH or where Debian installs it for root (sbin).
have() {
  command -v "$1" >/dev/null 2>&1 || [[ -x "/usr/sbin/$1" || -x "/sbin/$1" ]]
}

missing=() reasons=()
need() {
  [[ " ${missing[*]} " == *" $1 "* ]] && return
  missing+=("$1")
  reasons+=("  $1: $2")
}

check_packages() {
  missing=() reasons=()
  have make || need make "runs the Makefile"
  have git || need git "make verify diffs generated files"
  have openssl || need openssl "an independent verifier of issued certificate chains (daemons/certs)"
  have ip || need iproute2 "network namespaces for daemons/netd's tests (ip netns)"
  for c in iptables iptables-restore iptables-save; do
    have "${c}" || need iptables "daemons/netd programs ${c} in those namespaces"
  done
  have sysctl || need procps "daemons/netd's VPC test sets forwarding and proxy ARP in its namespaces"
  [[ -f /usr/share/java/zookeeper.jar ]] || need zookeeper "real ZooKeeper servers (internal/testutil/zookeeper)"
  [[ -f /usr/share/java/slf4j-simple.jar ]] || need libslf4j-java "ZooKeeper's logger on the test servers' classpath"
  have java || need default-jre-headless "runs ZooKeeper"
  /usr/bin/python3 -c 'import kazoo' >/dev/null 2>&1 ||
    need python3-kazoo "an independent ZooKeeper client, run by /usr/bin/python3 (daemons/zkregistrar/serverset)"
  have prometheus || need prometheus "a real Prometheus for the quota planner's source (governance/quota)"
  have chromium || need chromium "the web console's browser test, driven by chromedp (console)"
}

# check_aws: the AWS API emulator the AWS tests run against, found the way
# internal/awsemu finds it: $TRELLIS_MOTO_PYTHON, the python3 beside
# moto_server on PATH, pyenv's shims, python3.
check_aws() {
  local py cands=()
  [[ -n "${TRELLIS_MOTO_PYTHON:-}" ]] && cands+=("${TRELLIS_MOTO_PYTHON}")
  command -v moto_server >/dev/null 2>&1 && cands+=("$(dirname "$(command -v moto_server)")/python3")
  cands+=("${HOME}/.pyenv/shims/python3" python3)
  for py in "${cands[@]}"; do
    "${py}" -c 'import moto' >/dev/null 2>&1 && return
  done
  cat >&2 <<MSG
test-deps: moto (moto_server, the AWS API emulator) was not found; tried: ${cands[*]}.
  It is a Python package, not a Debian one, and this script does not install it:
  pip install 'moto[server]==5.2.1' for Python 3.11 (the test machines have it under
  pyenv), or point TRELLIS_MOTO_PYTHON at a python3 that imports moto.
MSG
  return 1
}

check_packages
if (( ${#missing[@]} > 0 )); then
  if (( install )) && [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "test-deps: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    check_packages
  fi
fi
status=0
if (( ${#missing[@]} > 0 )); then
  sudo="sudo "
  [[ "$(id -u)" == 0 ]] && sudo=""
  {
    echo "test-deps: the tests need these Debian packages, which are missing:"
    printf '%s\n' "${reasons[@]}"
    echo "Install them with:"
    echo "  ${sudo}apt-get update && ${sudo}apt-get install -y --no-install-recommends ${missing[*]}"
  } >&2
  status=1
fi
check_aws || status=1
exit "${status}"
