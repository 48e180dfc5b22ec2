# Sourced by hack/build-coredns.sh and hack/shared-deps.sh: the plugins the
# local node image's CoreDNS is built with, the ones a kind cluster's
# Corefile uses (kubeadm's default Corefile, plus log, rewrite, template,
# hosts, bind and whoami for a user's edits).
#
# plugin.cfg's order (the order a query passes through them), and each
# plugin's package.
plugins=(
  reload:reload
  bind:bind
  ready:ready
  health:health
  prometheus:metrics
  errors:errors
  log:log
  loadbalance:loadbalance
  cache:cache
  rewrite:rewrite
  template:template
  hosts:hosts
  kubernetes:kubernetes
  loop:loop
  forward:forward
  whoami:whoami
)
