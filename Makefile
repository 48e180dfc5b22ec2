# Trellis: `make help` lists the targets. The targets are a stable contract.
SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

GO        ?= go
BIN       := $(CURDIR)/bin
# The pinned versions (K8S_VERSION, ETCD_VERSION, KOPS_VERSION ...) are
# internal/versions/versions.env's, exported to the hack scripts; the
# environment or the command line wins (K8S_VERSION=v1.36.4 make tools).
VERSIONS_ENV := internal/versions/versions.env
VERSION_VARS := $(shell sed -n 's/^\([A-Z][A-Z0-9_]*\)=.*/\1/p' $(VERSIONS_ENV))
$(foreach v,$(VERSION_VARS),$(eval $(v) ?= $(shell sed -n 's/^$(v)=//p' $(VERSIONS_ENV))))
# Exported by name: a bare `export` would hand every make variable to every
# recipe (E2E_AWS_KILLS=20 reached `make e2e`'s reduced run that way).
export $(VERSION_VARS)
export TRELLIS_CACHE ?= $(HOME)/.cache/trellis
# Tests never talk to AWS or its metadata service.
export AWS_EC2_METADATA_DISABLED := true
# Everything is built without cgo: the images' binaries must be static, and
# when the tests, vet and the linter build the same way, `make build` after
# `make test` links from the build cache instead of compiling every package
# a second time (only the standard library's net, os/user, plugin and
# runtime/cgo have cgo files here, and all have pure-Go versions).
export CGO_ENABLED := 0
# No DWARF in compiled packages: the binaries are stripped (-s -w) and a
# test's failures and panics read file:line from the line table, not from
# DWARF. Without it, compiling takes about 15% less CPU (k8s.io/client-go
# and the core API, cold: 321 against 377 CPU-s). Every go command make
# runs gets it, tools and tests alike, so that they share one build cache
# (docs/design/builds.md); export the same GOFLAGS to reuse that cache
# from a go command run by hand.
export GOFLAGS := $(strip $(GOFLAGS) -gcflags=all=-dwarf=false)
GOTEST_FLAGS ?= -timeout 45m

##@ use

.PHONY: local
local: ## A two-node kind cluster wired like production (clusters/local.yaml), offline
	./hack/local.sh

.PHONY: local-aws
local-aws: local ## The AWS API emulator with clusters/local-aws created in it, instances as kind nodes (Ctrl-C stops)
	./bin/trellis local aws -f clusters/local-aws.yaml --kubeconfig $(HOME)/.kube/trellis-local.kubeconfig

.PHONY: fleet
fleet: tools-node tools-kwok tools-karmada build ## A fleet on loopback: Karmada and a kwok-backed member per definition, joined (Ctrl-C stops)
	./bin/trellis fleet local

.PHONY: fake-aws
fake-aws: tools-node build ## Create prod-us-east-1 against kops's AWS fake, addons on a loopback control plane
	./hack/fake-aws.sh

##@ test

.PHONY: test-deps
test-deps: ## Check the programs the tests run (ZooKeeper, Prometheus, moto ...); as root, install the missing ones
	./hack/test-deps.sh

.PHONY: test
# The fleet test (Karmada and two member control planes with kwok, their
# controllers and registrars) runs after the rest, alone: beside another
# package's control plane on 2 cores it starved that package's simulated
# kubelets past their timeouts.
FLEET_PKG := ./fleet/localfleet/
# Needs every tool: the control plane, the kops CLI (test/aws,
# cli/cluster), Karmada (fleet/karmada, fleet/localfleet, cli/fleet) and
# kwok (fleet/localfleet's members).
test: test-deps tools ## Unit and integration tests (real etcd, kube-apiserver, ZooKeeper, moto, Karmada)
	$(GO) test $(GOTEST_FLAGS) $$($(GO) list ./... | grep -v '/fleet/localfleet$$')
	$(GO) test $(GOTEST_FLAGS) $(FLEET_PKG)

.PHONY: test-loaded
# The hogs run at the tests' own priority and stop when the script exits
# (trap on EXIT); the log and the docs table's row go to _output/test-loaded.
test-loaded: ## Run make test (-count=1) with one CPU hog per core beside it (hack/cpuhog; HOGS=n for another number), as on a machine busy with the local cluster
	./hack/test-loaded.sh

.PHONY: test-unit
test-unit: ## Unit tests only (no tools needed)
	$(GO) test $(GOTEST_FLAGS) -skip '^TestIntegration' ./...

.PHONY: test-integration
test-integration: test-deps tools ## Integration tests only (TestIntegration*)
	$(GO) test $(GOTEST_FLAGS) -run '^TestIntegration' $$($(GO) list ./... | grep -v '/fleet/localfleet$$')
	$(GO) test $(GOTEST_FLAGS) -run '^TestIntegration' $(FLEET_PKG)

.PHONY: e2e
# The suite brings the cluster up itself, and its fleet tests' `local up
# --fleet` builds Karmada's images (no kwok: the nodes are kind's).
e2e: tools-node tools-karmada build ## End-to-end tests on the local kind cluster (root and Docker; brings it up first)
	./hack/local-host.sh
	$(GO) test -tags e2e -count=1 -v -timeout 45m ./test/e2e/

E2E_AWS_KILLS ?= 20

.PHONY: e2e-aws
e2e-aws: tools-node build ## The node-backed AMI rollout in full: 3 instance nodes, killed E2E_AWS_KILLS times
	./hack/local-host.sh
	E2E_AWS_FULL=1 E2E_AWS_KILLS=$(E2E_AWS_KILLS) $(GO) test -tags e2e -count=1 -v -timeout 120m -run TestAWSNodeRollout ./test/e2e/

FLEET_MEMBERS ?= 3
FLEET_SERVICES ?= 100

.PHONY: test-fleet
test-fleet: tools-node tools-kwok tools-karmada ## The fleet test in full: FLEET_MEMBERS members, FLEET_SERVICES services, every member failed over
	FLEET_MEMBERS=$(FLEET_MEMBERS) FLEET_SERVICES=$(FLEET_SERVICES) $(GO) test -count=1 -v -timeout 60m -run TestIntegrationFleet ./fleet/localfleet/

FUZZTIME ?= 60s

.PHONY: fuzz
# go test -fuzz takes one target in one package at a time.
fuzz: ## Fuzz the cluster-definition decoder and the gateway's submission decoder, FUZZTIME (60s) each
	$(GO) test -run '^$$' -fuzz '^FuzzLoadBytes$$' -fuzztime $(FUZZTIME) ./bootstrap/definition/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./gateway/

##@ bench

BENCH_N ?= 1000

.PHONY: bench
bench: tools-node bench-logshipper-deps ## Go benchmarks (CNI ADD p50/p99 through the real plugin among them) and the bench/ commands (controller, ZooKeeper, log shipper, rollouts, reads, surge, gateway)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime=1x ./daemons/certs/ ./bootstrap/rollout/ ./daemons/netd/
	$(GO) test -run '^$$' -bench . -benchmem $$($(GO) list ./... | grep -v '/daemons/certs$$\|/bootstrap/rollout$$\|/daemons/netd$$')
	$(GO) run ./bench/controller -n $(BENCH_N)
	$(GO) run ./bench/zkregistrar -pods 110 -flips 400 -gate both
	$(GO) run ./bench/zkfleet -sessions 2500 -members 35000 -ensemble 3
	$(GO) run ./bench/logshipper -lines 2000000
	$(GO) run ./bench/amirollout -nodes 2500 -pods 35000
	$(GO) run ./bench/awsrollout -nodes 6
	$(GO) run ./bench/reads -nodes 50 -pods 2000
	$(GO) run ./bench/surge -planned 300 -factor 3
	$(GO) run ./bench/gateway -submit-rates 50 -read-rate 1000 -workloads 10000

# bench/logshipper compares with rsyslog and checks Kafka with kcat: say so
# before a bench run starts, not half an hour into it.
.PHONY: bench-logshipper-deps
bench-logshipper-deps:
	@command -v rsyslogd >/dev/null || [ -x /usr/sbin/rsyslogd ] || { echo "bench/logshipper compares with rsyslog (Debian package rsyslog): apt-get update && apt-get install -y kafkacat rsyslog"; exit 1; }
	@command -v kcat >/dev/null || { echo "bench/logshipper checks Kafka with kcat (Debian package kafkacat): apt-get update && apt-get install -y kafkacat rsyslog"; exit 1; }

.PHONY: bench-hotpaths
bench-hotpaths: tools-node bench-logshipper-deps ## The four hot paths' benches alone (certificates, ZooKeeper, log shipper, controller; about 35 min): one Markdown row per goal, beside its anchor, in _output/bench-hotpaths
	GO=$(GO) BENCH_N=$(BENCH_N) ./hack/bench-hotpaths.sh

.PHONY: bench-scale
bench-scale: tools-node tools-kwok build ## 2,500 kwok nodes, 35,000 pods: QPS by client, mutating p99, memory, etcd size
	$(GO) run ./bench/scale -kwok $$(./hack/build-kwok.sh)

.PHONY: bench-fleet
bench-fleet: tools-node tools-kwok tools-karmada build ## 100 and 1,000 TrellisServices through the fleet vs direct; failover time
	$(GO) run ./bench/fleet -pin -controller $(BIN)/trellis-controller

.PHONY: bench-aws-nodes
bench-aws-nodes: local ## Trellis vs kops rolling the local AWS loop's nodes on real kubelets
	$(GO) run ./bench/awsnodes -trellis $(BIN)/trellis

.PHONY: bench-backtest
bench-backtest: ## The forecast planner vs peak+20% on the generated families, 24 seeds (about 1 min)
	$(GO) run ./bench/backtest -seeds 24

.PHONY: backtest-recorded
# Real time: the rates are what the machine managed to send each second, so
# run it with nothing else on the machine (make test records 2 days stamped).
backtest-recorded: test-deps tools-node ## Record 42 virtual days of request rates in real time (17 min; needs the machine to itself) and backtest the planners on them
	RECORD_FULL=1 $(GO) test -count=1 -v -timeout 40m -run '^TestIntegrationRecordRealTime$$' ./bench/backtest/recorded/
	UPDATE=1 $(GO) test -count=1 -v -run TestBacktestRecorded ./bench/backtest/recorded/

##@ dev

.PHONY: help
help: ## Show this help, grouped as use, test, bench and dev
	@awk 'BEGIN {FS = ":.*## "} /^##@ / {printf "\n\033[1m%s\033[0m\n", substr($$0, 5)} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
# Without the symbol table and DWARF (-s -w) the 16 links take about 40%
# less CPU (43 s against 71 s); panics still print their stacks.
BUILD_LDFLAGS ?= -s -w

build: ## Build the trellis binaries (static, for the local images) into ./bin
	$(GO) build -ldflags "$(BUILD_LDFLAGS)" -o $(BIN)/ ./cmd/...

.PHONY: tools
tools: tools-node tools-kops tools-kwok tools-karmada ## Build every pinned tool into $TRELLIS_CACHE, once (what CI and make test need)

.PHONY: tools-node
tools-node: tools-k8s tools-coredns ## Build Kubernetes, etcd and CoreDNS: the control plane of tests and the local node image

.PHONY: tools-k8s
tools-k8s: ## Build Kubernetes and etcd (part of tools-node)
	./hack/build-k8s.sh >/dev/null

.PHONY: tools-coredns
tools-coredns: ## Build CoreDNS, the local node image's cluster DNS (part of tools-node)
	./hack/build-coredns.sh >/dev/null

.PHONY: tools-kops
tools-kops: ## Build the kops CLI (tests check that it reads what Trellis writes)
	./hack/build-kops.sh >/dev/null

.PHONY: tools-kwok
tools-kwok: ## Build kwok: the simulated nodes of the fleet's members and of bench-scale
	./hack/build-kwok.sh >/dev/null

.PHONY: tools-karmada
tools-karmada: ## Build Karmada: the fleet's control plane (its tests, e2e's local up --fleet)
	./hack/build-karmada.sh >/dev/null

CONTROLLER_GEN := $(BIN)/controller-gen

$(CONTROLLER_GEN): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && $(GO) build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy code, CRDs (config/crd) and golden files
	$(CONTROLLER_GEN) object paths=./api/... crd:crdVersions=v1,maxDescLen=0 output:crd:artifacts:config=config/crd
	UPDATE=1 $(GO) test ./bootstrap/render/ ./controller/... ./governance/forecast/report/ ./governance/apfplan/ ./local/

GOLANGCI_LINT := $(BIN)/golangci-lint

$(GOLANGCI_LINT): hack/lint/go.mod hack/lint/go.sum
	cd hack/lint && $(GO) build -o $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (pinned in hack/lint; linters in .golangci.yml)
	$(GOLANGCI_LINT) run --build-tags e2e ./...

.PHONY: verify
# go vet's analyzers run inside the linter (govet, with the e2e suite's
# build tag); a separate `go vet ./...` only repeated them.
verify: $(CONTROLLER_GEN) lint ## Fail on lint findings, unformatted code, stale generated or golden files, untidy go.mod, tools off go.mod's versions
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(CONTROLLER_GEN) object paths=./api/... crd:crdVersions=v1,maxDescLen=0 output:crd:artifacts:config=config/crd
	@git diff --exit-code -- api config/crd || { echo "generated files are stale: run make generate"; exit 1; }
	$(GO) test ./bootstrap/render/
	$(GO) mod tidy -diff
	./hack/shared-deps.sh
