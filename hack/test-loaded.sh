#!/usr/bin/env bash
# Runs `make test` with one CPU hog per core beside it (hack/cpuhog), as a
# newcomer's machine is when the local cluster from `make local` is still
# busy: the tests must pass there too (docs/design/testing-under-load.md).
# The hogs start after test-deps and tools (a cold tools build would only
# take longer) and stop when this script exits, however it exits. The log
# goes to _output/test-loaded/; the last lines give the docs table's row:
# the result and the slowest packages.
#
#   hack/test-loaded.sh             one hog per core (nproc)
#   HOGS=4 hack/test-loaded.sh      four
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
MAKE=${MAKE:-make}
hogs=${HOGS:-$(nproc)}
out=_output/test-loaded
mkdir -p "${out}" bin
log="${out}/$(date -u +%Y%m%dT%H%M%SZ).log"

"${MAKE}" test-deps tools
"${GO}" build -o bin/cpuhog ./hack/cpuhog

bin/cpuhog -n "${hogs}" >"${out}/cpuhog.log" 2>&1 &
hog=$!
tests=
stop() {
  # make test runs in its own process group (set -m below): stop it and
  # its go test children if this script is stopped first.
  [[ -z "${tests}" ]] || kill -TERM -- "-${tests}" 2>/dev/null || true
  kill -TERM "${hog}" 2>/dev/null || true
  wait "${hog}" 2>/dev/null || true
  cat "${out}/cpuhog.log" >&2
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

began=$(date +%s)
status=0
# -count=1: a cached pass proves nothing about this load. In the
# background and waited for, so that a signal stops it at once.
set -m
"${MAKE}" test GOTEST_FLAGS="-count=1 ${GOTEST_FLAGS:--timeout 45m}" >"${log}" 2>&1 &
tests=$!
set +m
tail -n +1 -f --pid="${tests}" "${log}" &
shown=$!
wait "${tests}" || status=$?
tests=
wait "${shown}" || true
took=$(( $(date +%s) - began ))

result=pass
(( status == 0 )) || result=fail
# The top five by awk, not head: head exits after five lines, and a sort
# still writing then dies of SIGPIPE, which pipefail and set -e turn into
# the script's end before its summary (run 5, 2026-11-29).
slowest=$(awk '$1 == "ok" || $1 == "FAIL" { if ($3 ~ /s$/) { t = $3; sub(/s$/, "", t); printf "%s %s\n", t, $2 } }' "${log}" |
  sort -rn | awk 'NR <= 5 { sub("github.com/trellis-dev/trellis/", "", $2); printf "%s%s %ss", sep, $2, $1; sep = ", " }')
failed=$(awk '$1 == "FAIL" && $2 ~ /\// { sub("github.com/trellis-dev/trellis/", "", $2); printf "%s%s", sep, $2; sep = ", " }' "${log}")
{
  echo "test-loaded: ${result} in ${took}s with ${hogs} hogs on $(nproc) cores; log ${log}"
  echo "test-loaded: slowest packages: ${slowest}"
  [[ -z "${failed}" ]] || echo "test-loaded: failed packages: ${failed}"
  echo "test-loaded: docs/benchmarks/test-loaded.md row:"
  echo "| $(date -u +%Y-%m-%d) | $(nproc) cores, ${hogs} hogs | $(git rev-parse --short HEAD) | ${result} (${took}s) | ${slowest} |"
} | tee -a "${log}"
exit "${status}"
