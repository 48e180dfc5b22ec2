#!/usr/bin/env bash
# Checks what `make test` needs beyond Go and `make tools`: the programs the
# tests run (openssl, ip, iptables, ZooKeeper on Java, python3-kazoo,
# Prometheus). As root with apt-get it installs the missing Debian packages;
# otherwise it fails at once, naming every missing package and the command
# that installs them. `make test`, `make test-integration` and .ci/run call it.
#
#   hack/test-deps.sh          check, and install what is missing (root + apt-get)
#   hack/test-deps.sh --check  check only
#   hack/test-deps.sh --aws    also check for moto_server, the AWS API emulator
#                              (pip-installed, under pyenv on the test machines;
#                              this script never installs it). Not yet needed by
#                              `make test`.
set -euo pipefail

install=1 aws=0
for arg in "$@"; do
  case "${arg}" in
    --check) install=0 ;;
    --aws) aws=1 ;;
    *) echo "usage: $0 [--check] [--aws]" >&2; exit 2 ;;
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
  [[ -f /usr/share/java/zookeeper.jar ]] || need zookeeper "real ZooKeeper servers (internal/testutil/zookeeper)"
  [[ -f /usr/share/java/slf4j-simple.jar ]] || need libslf4j-java "ZooKeeper's logger on the test servers' classpath"
  have java || need default-jre-headless "runs ZooKeeper"
  /usr/bin/python3 -c 'import kazoo' >/dev/null 2>&1 ||
    need python3-kazoo "an independent ZooKeeper client, run by /usr/bin/python3 (daemons/zkregistrar/serverset)"
  have prometheus || need prometheus "a real Prometheus for the quota planner's source (governance/quota)"
}

# check_aws: the AWS API emulator the AWS tests will run against.
check_aws() {
  command -v moto_server >/dev/null 2>&1 && return
  cat >&2 <<MSG
test-deps: moto_server (the AWS API emulator) is not on PATH.
  It is a Python package, not a Debian one, and this script does not install it:
  pip install 'moto[server]'   (the test machines have it under pyenv: put its shims on PATH)
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
if (( aws )); then
  check_aws || status=1
fi
exit "${status}"
