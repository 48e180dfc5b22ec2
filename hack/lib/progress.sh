# Sourced by hack/build-*.sh: one line per step on stderr, in kind's style,
# so a 10-minute compile says what it is doing and how long it took:
#
#   step "Building Kubernetes v1.36.3" "cold: ~10 min"
#                                        ->  " • Building Kubernetes v1.36.3 (cold: ~10 min) ..."
#   step_done (or the next step, or the script's end)
#                                        ->  " ✓ Building Kubernetes v1.36.3 (6m12s)"
#   a script that fails inside a step    ->  " ✗ Building Kubernetes v1.36.3 (41s)"
#   cached "Kubernetes v1.36.3"          ->  " ✓ Kubernetes v1.36.3 (cached)"
#
# stdout stays for what the script prints for its caller (a directory).
_progress_name=""
_progress_start=0

# _progress_elapsed prints the current step's wall time as local.Elapsed
# does in Go: "<1s", "42s", "6m12s", "1h2m0s".
_progress_elapsed() {
  local s=$(( SECONDS - _progress_start ))
  if (( s < 1 )); then printf '<1s'
  elif (( s < 60 )); then printf '%ds' "${s}"
  elif (( s < 3600 )); then printf '%dm%ds' $(( s / 60 )) $(( s % 60 ))
  else printf '%dh%dm%ds' $(( s / 3600 )) $(( s % 3600 / 60 )) $(( s % 60 ))
  fi
}

step_done() {
  [[ -n "${_progress_name}" ]] || return 0
  echo " ✓ ${_progress_name} ($(_progress_elapsed))" >&2
  _progress_name=""
}

# step NAME [HINT]: the hint (what is built, how long it takes cold) is
# shown only as the step starts.
step() {
  step_done
  _progress_name="$1"
  _progress_start=${SECONDS}
  echo " • ${_progress_name}${2:+ (${2})} ..." >&2
}

cached() { echo " ✓ $* (cached)" >&2; }

_progress_exit() {
  local rc=$1
  [[ -n "${_progress_name}" ]] || return 0
  if (( rc != 0 )); then
    echo " ✗ ${_progress_name} ($(_progress_elapsed))" >&2
    _progress_name=""
  else
    step_done
  fi
}
trap '_progress_exit $?' EXIT
