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
GOTEST_FLAGS ?= -timeout 45m

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the trellis binaries (static, for the local images) into ./bin
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: tools
tools: ## Build Kubernetes $(K8S_VERSION), etcd $(ETCD_VERSION), the kops CLI, kwok and Karmada $(KARMADA_VERSION) into $(TRELLIS_CACHE) (once)
	./hack/build-k8s.sh
	./hack/build-kops.sh
	./hack/build-coredns.sh
	./hack/build-kwok.sh >/dev/null
	./hack/build-karmada.sh >/dev/null

.PHONY: test-deps
test-deps: ## Check the programs the tests run (ZooKeeper, Prometheus, iptables ...); as root, apt-get install the missing ones
	./hack/test-deps.sh

.PHONY: test
# The fleet test (Karmada and two member control planes with kwok, their
# controllers and registrars) runs after the rest, alone: beside another
# package's control plane on 2 cores it starved that package's simulated
# kubelets past their timeouts.
FLEET_PKG := ./fleet/localfleet/
test: test-deps tools ## Run unit and integration tests (real etcd + kube-apiserver from `make tools`)
	$(GO) test $(GOTEST_FLAGS) $$($(GO) list ./... | grep -v '/fleet/localfleet$$')
	$(GO) test $(GOTEST_FLAGS) $(FLEET_PKG)

.PHONY: test-unit
test-unit: ## Run unit tests only
	$(GO) test $(GOTEST_FLAGS) -skip '^TestIntegration' ./...

.PHONY: test-integration
test-integration: test-deps tools ## Run integration tests only
	$(GO) test $(GOTEST_FLAGS) -run '^TestIntegration' $$($(GO) list ./... | grep -v '/fleet/localfleet$$')
	$(GO) test $(GOTEST_FLAGS) -run '^TestIntegration' $(FLEET_PKG)

.PHONY: e2e
e2e: tools build ## Run the end-to-end tests on the local kind cluster (brings it up first; needs root and Docker)
	./hack/local-host.sh
	$(GO) test -tags e2e -count=1 -v -timeout 45m ./test/e2e/

BENCH_N ?= 1000

.PHONY: bench
bench: tools ## Run benchmarks and print their numbers (controller vs native; ZooKeeper registration latency and fleet scale)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime=1x ./daemons/certs/ ./bootstrap/rollout/
	$(GO) test -run '^$$' -bench . -benchmem $$($(GO) list ./... | grep -v '/daemons/certs$$\|/bootstrap/rollout$$')
	$(GO) run ./bench/controller -n $(BENCH_N)
	$(GO) run ./bench/zkregistrar -pods 110 -flips 400
	$(GO) run ./bench/zkfleet -sessions 2500 -members 35000 -ensemble 3
	@command -v rsyslogd >/dev/null || { echo "bench/logshipper compares with rsyslog: apt-get install rsyslog"; exit 1; }
	$(GO) run ./bench/logshipper -lines 2000000
	$(GO) run ./bench/amirollout -nodes 2500 -pods 35000
	$(GO) run ./bench/awsrollout -nodes 6
	$(GO) run ./bench/reads -nodes 50 -pods 2000
	$(GO) run ./bench/surge -planned 300 -factor 3

.PHONY: fuzz
fuzz: ## Fuzz the cluster-definition decoder for 60s
	$(GO) test -run '^$$' -fuzz FuzzLoadBytes -fuzztime 60s ./bootstrap/definition/

CONTROLLER_GEN := $(BIN)/controller-gen

$(CONTROLLER_GEN): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && $(GO) build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy code, CRDs (config/crd) and golden files
	$(CONTROLLER_GEN) object paths=./api/... crd:crdVersions=v1,maxDescLen=0 output:crd:artifacts:config=config/crd
	UPDATE=1 $(GO) test ./bootstrap/render/ ./controller/... ./governance/forecast/report/ ./governance/apfplan/

GOLANGCI_LINT := $(BIN)/golangci-lint

$(GOLANGCI_LINT): hack/lint/go.mod hack/lint/go.sum
	cd hack/lint && $(GO) build -o $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (pinned in hack/lint; linters in .golangci.yml); verify runs it too
	$(GOLANGCI_LINT) run --build-tags e2e ./...

.PHONY: verify
# go vet's analyzers run inside the linter (govet, with the e2e suite's
# build tag); a separate `go vet ./...` only repeated them.
verify: $(CONTROLLER_GEN) lint ## Fail on lint findings (vet's included), unformatted code, stale generated or golden files, an untidy go.mod
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(CONTROLLER_GEN) object paths=./api/... crd:crdVersions=v1,maxDescLen=0 output:crd:artifacts:config=config/crd
	@git diff --exit-code -- api config/crd || { echo "generated files are stale: run make generate"; exit 1; }
	$(GO) test ./bootstrap/render/
	$(GO) mod tidy -diff

.PHONY: local
local: tools build ## A two-node kind cluster wired like production (clusters/local.yaml), built offline
	./hack/local.sh

.PHONY: local-aws
local-aws: local ## The production path locally: the AWS API emulator, clusters/local-aws created in it, its instances as nodes of the local cluster (runs until Ctrl-C)
	./bin/trellis local aws -f clusters/local-aws.yaml --kubeconfig $(HOME)/.kube/trellis-local.kubeconfig

E2E_AWS_KILLS ?= 20

.PHONY: e2e-aws
e2e-aws: tools build ## The node-backed AMI rollout in full: 3 instance nodes in 2 groups, the rollout killed with SIGKILL E2E_AWS_KILLS times (make e2e runs a reduced form: 2 nodes, 1 kill)
	./hack/local-host.sh
	E2E_AWS_FULL=1 E2E_AWS_KILLS=$(E2E_AWS_KILLS) $(GO) test -tags e2e -count=1 -v -timeout 120m -run TestAWSNodeRollout ./test/e2e/

.PHONY: bench-aws-nodes
bench-aws-nodes: local ## The node-backed rollout bench: Trellis and kops's RollingUpdateCluster roll the local AWS loop's general group on real kubelets (wall time, AWS and Kubernetes calls per node, cordon to gone)
	$(GO) run ./bench/awsnodes -trellis $(BIN)/trellis

.PHONY: bench-scale
bench-scale: tools build ## The 2,500-node / 35,000-pod scale test (kwok): QPS by client, mutating p99, memory, etcd size, _output/bench-scale/scale.png
	$(GO) run ./bench/scale -kwok $$(./hack/build-kwok.sh)

.PHONY: fleet
fleet: tools build ## A fleet on loopback: Karmada and a member per definition (clusters/prod-us-east-1, staging-us-west-2; kwok nodes, the real trellis-controller), joined (runs until Ctrl-C)
	./bin/trellis fleet local

FLEET_MEMBERS ?= 3
FLEET_SERVICES ?= 100

.PHONY: test-fleet
test-fleet: tools ## The fleet test in full: $(FLEET_MEMBERS) members, $(FLEET_SERVICES) services through a controller-manager kill, every member failed over in turn (make test runs 2 members, 10 services, 1 failover)
	FLEET_MEMBERS=$(FLEET_MEMBERS) FLEET_SERVICES=$(FLEET_SERVICES) $(GO) test -count=1 -v -timeout 60m -run TestIntegrationFleet ./fleet/localfleet/

.PHONY: bench-fleet
bench-fleet: tools build ## The fleet bench (production topology: the fleet control plane on its own CPU): 100 and 1,000 TrellisServices applied at the fleet vs to a member directly (apply -> Ready p50/p99, requests per apiserver, Karmada's memory), failover time
	$(GO) run ./bench/fleet -pin -controller $(BIN)/trellis-controller

.PHONY: bench-backtest
bench-backtest: ## The forecast planner against peak+20% on the generated families over 24 seeds (make test runs 3): the table, over-provisioning per family (all seeds and single seeds), exhausted plans (about 1 min)
	$(GO) run ./bench/backtest -seeds 24

.PHONY: backtest-recorded
backtest-recorded: test-deps tools ## Record 42 virtual days of tenants' request rates on a real apiserver and Prometheus (1 s an hour, 17 min) into governance/forecast/backtest/recorded/testdata, and backtest the planners on them (make test records 2 days and scores the committed recording)
	RECORD_FULL=1 $(GO) test -count=1 -v -timeout 40m -run TestIntegrationRecord ./governance/forecast/backtest/recorded/
	UPDATE=1 $(GO) test -count=1 -v -run TestBacktestRecorded ./governance/forecast/backtest/recorded/

.PHONY: fake-aws
fake-aws: tools build ## Create prod-us-east-1 against kops's AWS fake and apply the addons to a loopback control plane
	./hack/fake-aws.sh
