#!/usr/bin/env bash
# Makes this host able to run local clusters: installs debootstrap (the node
# image's rootfs) and Debian's docker.io when absent, and on hosts whose
# capability bounding set lacks CAP_SYS_RESOURCE (privileged containers then fail) registers trellis-runc
# (cmd/trellis-runc) as dockerd's default runtime. A host that does not need
# the shim is left untouched. Starts dockerd without systemd when no engine
# answers. Idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

need=()
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
if (( ${#need[@]} > 0 )); then
  echo "==> Installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# CapBnd bit 24 is CAP_SYS_RESOURCE.
capbnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
need_shim=0
(( (16#${capbnd} >> 24) & 1 )) || need_shim=1
conf=/etc/docker/daemon.json
want='{"runtimes":{"trellis-runc":{"path":"/usr/local/bin/trellis-runc"}},"default-runtime":"trellis-runc"}'
restart=0
if (( need_shim )); then
  (cd "${root}" && CGO_ENABLED=0 go build -o /usr/local/bin/trellis-runc.new ./cmd/trellis-runc)
  mv /usr/local/bin/trellis-runc.new /usr/local/bin/trellis-runc
  if [[ ! -f "${conf}" ]] || ! grep -q trellis-runc "${conf}"; then
    if [[ -f "${conf}" ]] && [[ -s "${conf}" ]]; then
      echo "${conf} exists: add ${want} to it by hand (this host lacks CAP_SYS_RESOURCE)" >&2
      exit 1
    fi
    echo "==> This host lacks CAP_SYS_RESOURCE: registering trellis-runc as dockerd's default runtime"
    mkdir -p /etc/docker
    echo "${want}" >"${conf}"
    restart=1
  fi
fi

if (( restart )) && pgrep -x dockerd >/dev/null; then
  echo "==> Restarting dockerd for the new runtime"
  pkill -x dockerd
  while pgrep -x dockerd >/dev/null; do sleep 0.2; done
fi
if ! docker info >/dev/null 2>&1; then
  if command -v systemctl >/dev/null 2>&1 && systemctl is-system-running >/dev/null 2>&1; then
    systemctl restart docker
  else
    echo "==> Starting dockerd (log: /var/log/trellis-dockerd.log)"
    nohup dockerd >/var/log/trellis-dockerd.log 2>&1 &
  fi
  for _ in $(seq 1 150); do docker info >/dev/null 2>&1 && break; sleep 0.2; done
  docker info >/dev/null 2>&1 || { tail -n 30 /var/log/trellis-dockerd.log >&2; exit 1; }
fi
echo "==> Docker $(docker version --format '{{.Server.Version}}') ready (default runtime: $(docker info --format '{{.DefaultRuntime}}'))"

# Disk: the node image, the runtime images and every node's containerd
# (kind's two and the AWS instance nodes, each holding every image) live
# under Docker's root. Measured: `make e2e` on a reused cluster took up to
# 14.7 GB more than it started with (images rebuilt and reloaded, an
# instance-node rollout); a new cluster's node image and two nodes hold
# about 9.5 GB. Fail now, naming the space, rather than half-way through a
# rollout with "no space left on device".
root=$(docker info --format '{{.DockerRootDir}}')
need=${TRELLIS_MIN_FREE_GB:-}
if [[ -z "${need}" ]]; then
  need=20
  [[ -n "$(docker ps -aq --filter label=io.x-k8s.kind.role=control-plane)" ]] || need=30
fi
free=$(df -BG --output=avail "${root}" | tail -n 1 | tr -dc 0-9)
if (( free < need )); then
  echo "error: ${free} GiB free under ${root} (Docker's root); a local cluster with AWS instance nodes needs ${need} GiB (TRELLIS_MIN_FREE_GB overrides)." >&2
  echo "What Docker holds (docker system prune and trellis local down free it):" >&2
  docker system df >&2
  exit 1
fi
echo "==> ${free} GiB free under ${root} (${need} GiB needed)"
