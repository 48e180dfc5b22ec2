#!/usr/bin/env bash
# Runs the benches of the four hot paths (issue 42) one after another, each
# as `make bench` runs it, and prints one Markdown row per goal for
# docs/benchmarks/hot-paths.md: the date, the machine, the commit, the
# figure beside its anchor, the goal, and met or missed.
#
# Every bench is built first and then run alone, so no compile runs beside
# a bench. The logs and the rows go to _output/bench-hotpaths/<time>/.
#
#   hack/bench-hotpaths.sh                 all four (about 35 min)
#   HOTPATHS="certs zk" hack/bench-hotpaths.sh
#                                          those only (certs zk logshipper controller)
#   hack/bench-hotpaths.sh --from DIR      the rows of the logs a run left in DIR
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
BENCH_N=${BENCH_N:-1000}
paths=${HOTPATHS:-certs zk logshipper controller}

# row NAME LOG: the Markdown row of one hot path's log.
row() {
  local name=$1 log=$2
  [[ -s ${log} ]] || return 0
  if [[ -f ${log}.rc && $(cat "${log}.rc") != 0 ]]; then
    printf '| %s | the bench failed (exit %s): %s | | missed |\n' "${name}" "$(cat "${log}.rc")" "${log}"
    return 0
  fi
  case ${name} in
  certs)
    awk '
      /^one core, [0-9]+ interleaved rounds:/ {
        for (i = 1; i <= NF; i++) {
          if ($i == "issuer") issuer = $(i + 1)
          if ($i == "floor" && $(i - 1) == "crypto") floor = $(i + 2)
        }
      }
      # The ratio unrounded, from the benchmark line: 0.7979 is a miss.
      /^BenchmarkIssuance/ { for (i = 1; i <= NF; i++) if ($i == "floor-ratio") ratio = $(i - 1) }
      /^issuance through the agent at 100 req\/s:/ {
        for (i = 1; i <= NF; i++) if ($i == "p99" && p99 == "") p99 = $(i + 1)
      }
      END {
        if (ratio == "" || p99 == "") { print "| certificate issuance | no result in the log | | missed |"; exit }
        met = (ratio + 0 >= 0.80 && p99 + 0 < 10) ? "met" : "missed"
        printf "| certificate issuance (`BenchmarkIssuance`) | the issuer %s certificates/s on one core, against the crypto floor of %s (1 signature + 2 verifications each): **%.3f of the floor**; p99 %s ms through the agent at 100 requests/s | ≥ 0.80 of the floor; p99 < 10 ms | %s |\n", issuer, floor, ratio, p99, met
      }' "${log}"
    ;;
  zk)
    awk '
      /^status answered -> znode visible or gone/ { off = $(NF - 6); on = $(NF - 1) }
      /ZooKeeper writes [0-9]+ for [0-9]+ transitions/ {
        for (i = 1; i <= NF; i++) if ($i == "per" && $(i + 1) == "transition;") w = w sep $(i - 1)
        sep = " / "
      }
      END {
        if (off == "" || on == "") { print "| ZooKeeper registration | no result in the log | | missed |"; exit }
        met = (off + 0 < 30 && on + 0 < 30 && w == "1.00 / 1.00") ? "met" : "missed"
        printf "| ZooKeeper registration (`bench/zkregistrar -pods 110 -flips 400`) | status answered → znode, **p99 %s ms** without the readiness gate, **%s ms** with it; ZooKeeper writes per transition %s (without / with) | p99 < 30 ms, 1.00 write per transition | %s |\n", off, on, w, met
      }' "${log}"
    ;;
  logshipper)
    awk '
      /^  median of the [0-9]+ rounds. ratios:/ { ratio = $7; lo = $12; hi = $14; sub(/,$/, "", lo); sub(/\)$/, "", hi) }
      /^trellis-log-shipper \(production/ && /median of/ { us = $(NF - 2) }
      /^rsyslog imfile -> omfile/ && /median of/ { rs = $(NF - 2) }
      END {
        if (ratio == "") { print "| log shipping | no result in the log | | missed |"; exit }
        met = (ratio + 0 >= 1.5) ? "met" : "missed"
        printf "| log shipping (`bench/logshipper -lines 2000000`) | the shipper (informer enrichment, Kafka zstd) %s CPU per line, rsyslog %s: **%s× rsyslog per core**, the median of the rounds (%s to %s) | ≥ 1.5× | %s |\n", us, rs, ratio, lo, hi, met
      }' "${log}"
    ;;
  controller)
    awk '
      /^median of [0-9]+ rounds: bundle/ { n = $3; bundle = $6; trellis = $8; ratio = $12; sub(/,$/, "", bundle); sub(/;$/, "", trellis) }
      /^median ratio of the CPU to quiet/ { quiet = $NF }
      END {
        if (ratio == "") { print "| controller overhead | no result in the log | | missed |"; exit }
        met = (ratio + 0 <= 1.15) ? "met" : "missed"
        printf "| controller overhead (`bench/controller -n '"${BENCH_N}"'`) | '"${BENCH_N}"' TrellisServices %s, the same objects created directly %s (medians of %s rounds): **%s×**; CPU to quiet %s× | ≤ 1.15× | %s |\n", trellis, bundle, n, ratio, quiet, met
      }' "${log}"
    ;;
  esac
}

# rows DIR: the header and the row of every log in DIR.
rows() {
  local dir=$1
  cat "${dir}/machine"
  echo
  echo "| hot path | figure, beside its anchor | goal | |"
  echo "|---|---|---|---|"
  for p in certs zk logshipper controller; do
    row "${p}" "${dir}/${p}.log"
  done
}

if [[ ${1:-} == --from ]]; then
  rows "${2:?--from needs the directory of a run}"
  exit 0
fi

for p in ${paths}; do
  case ${p} in
  certs | zk | logshipper | controller) ;;
  *) echo "bench-hotpaths: unknown hot path ${p} (certs zk logshipper controller)" >&2; exit 2 ;;
  esac
done

out=_output/bench-hotpaths/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "${out}"
commit=$(git rev-parse --short HEAD)
[[ -z $(git status --porcelain --untracked-files=no) ]] || commit="${commit} with local changes"
printf '| date | machine | commit |\n|---|---|---|\n| %s | %s cores, %s GiB; load average %s at the start | %s |\n' \
  "$(date -u +%Y-%m-%d)" "$(nproc)" "$(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "${commit}" >"${out}/machine"

# Build everything first: a compile beside a bench would be measured.
"${GO}" test -c -o "${out}/certs.test" ./daemons/certs/
for b in zkregistrar logshipper controller; do
  "${GO}" build -o "${out}/${b}" "./bench/${b}"
done

for p in ${paths}; do
  echo "bench-hotpaths: ${p} (log ${out}/${p}.log)"
  rc=0
  case ${p} in
  certs) (cd daemons/certs && "../../${out}/certs.test" -test.run '^$' -test.bench Issuance -test.benchtime 1x) >"${out}/certs.log" 2>&1 || rc=$? ;;
  zk) "${out}/zkregistrar" -pods 110 -flips 400 -gate both >"${out}/zk.log" 2>&1 || rc=$? ;;
  logshipper) "${out}/logshipper" -lines 2000000 >"${out}/logshipper.log" 2>&1 || rc=$? ;;
  controller) "${out}/controller" -n "${BENCH_N}" >"${out}/controller.log" 2>&1 || rc=$? ;;
  esac
  echo "${rc}" >"${out}/${p}.log.rc"
done

rows "${out}" | tee "${out}/rows.md"
