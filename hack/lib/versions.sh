# Sourced by hack/*.sh: sets each KEY=VALUE of internal/versions/versions.env
# that the environment does not already set, and exports it.
_versions_env="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/internal/versions/versions.env"
while IFS='=' read -r _key _value; do
  [[ "${_key}" =~ ^[A-Z][A-Z0-9_]*$ ]] || continue
  [[ -n "${!_key:-}" ]] || export "${_key}=${_value}"
done <"${_versions_env}"
unset _versions_env _key _value
