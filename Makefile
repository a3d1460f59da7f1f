# acm-cluster-sp — see README.md. Everything the tests need is built from pinned versions through the Go module
# proxy; nothing is installed system-wide. The local hub's binaries are cached outside the repository.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

export GONOSUMDB ?= github.com/openshift/*
export GOFLAGS ?= -buildvcs=false

CACHE_DIR  ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/acm-cluster-sp
HUB_BIN    ?= $(or $(KUBEBUILDER_ASSETS),$(CACHE_DIR)/bin/k8s-1.34.10-etcd-3.6.16)
export KUBEBUILDER_ASSETS := $(HUB_BIN)
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-unknown)
LDFLAGS    := -s -w -X github.com/dcm-sp/acm-cluster-sp/internal/buildinfo.version=$(VERSION)
GOTOOL     := go tool -modfile=tools/go.mod
# -ldflags=-w: test binaries without DWARF link in about half the time (a race build of the migrator's package: 7.0 →
# 4.0 s); stack traces and race reports read the runtime's own tables, not DWARF.
TEST_FLAGS ?= -race -timeout 25m -parallel 6 -ldflags=-w
# TEST_GOGC is the garbage collector target of everything make test runs (the compiler, the race-instrumented test
# binaries, the hub and SP processes they start): on two cores the suite is CPU-bound, and a test binary at Go's
# default collects often (the migrator's package: 534 s of CPU at 100, 505 s at 400, for 1.7 GB more at its peak).
TEST_GOGC  ?= 400
# SLOW_PKGS are named before ./... so that go test builds and starts them first (it schedules packages in the
# order given): the longest package then runs beside all the others instead of alone at the end. Only the order
# depends on this list; a package missing from it still runs.
SLOW_PKGS  ?= ./internal/capiprivate/migrate/controller ./internal/sp/app ./internal/capiprivate/crds \
	./internal/capiprivate/proxy/hubtest ./internal/capiprivate/webhook ./internal/capiprivate/inject/hubtest
BIN        := bin/acm-cluster-sp
DEV_BIN    := bin/acm-cluster-sp-dev
CAPI_BIN   := bin/capi-private
CAPI_DEV   := bin/capi-private-dev

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  make %-16s %s\n", $$1, $$2}'

.PHONY: tools
tools: ## build kube-apiserver, etcd and kubectl into the cache (first time ~8 min; then instant)
	@hack/tools.sh >/dev/null

$(HUB_BIN)/.complete:
	@hack/tools.sh >/dev/null

.PHONY: build
build: ## build bin/acm-cluster-sp, bin/acm-cluster-sp-dev (with `dev`) and bin/capi-private with the version stamped in
	go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/acm-cluster-sp
	go build -trimpath -ldflags "$(LDFLAGS)" -o $(DEV_BIN) ./cmd/acm-cluster-sp-dev
	go build -trimpath -ldflags "$(LDFLAGS)" -o $(CAPI_BIN) ./cmd/capi-private

.PHONY: run
run: $(HUB_BIN)/.complete build ## run the service on an embedded local hub (bin/acm-cluster-sp-dev dev)
	./$(DEV_BIN) dev $(RUN_ARGS)

.PHONY: run-capi
run-capi: $(HUB_BIN)/.complete ## run capi-private dev (bin/capi-private-dev): local hub, platform CAPI, private CRDs, webhook, proxy, upstream CAPI + ledger provider, demo cluster
	go build -trimpath -ldflags "$(LDFLAGS)" -o $(CAPI_DEV) ./cmd/capi-private-dev
	./$(CAPI_DEV) dev $(RUN_ARGS)

# TEST_JSON keeps the last run's `go test -json` record: `make test-slowest` (and .ci/run) reads it.
TEST_JSON  ?= bin/test.json
GOTESTSUM  := $(GOTOOL) gotestsum --format pkgname-and-test-fails --format-hide-empty-pkg --jsonfile $(TEST_JSON)

.PHONY: test
test: $(HUB_BIN)/.complete ## run every test with the race detector (unit and integration, on the real local hub); then the 15 slowest
	@mkdir -p $(dir $(TEST_JSON))
	@rc=0; GOGC=$(TEST_GOGC) $(GOTESTSUM) -- $(TEST_FLAGS) $(SLOW_PKGS) ./... || rc=$$?; $(MAKE) --no-print-directory test-slowest; exit $$rc

.PHONY: test-slowest
test-slowest: ## the 15 slowest tests of the last make test, with their packages (from $(TEST_JSON))
	@echo "== the 15 slowest tests (of $(TEST_JSON))"
	@$(GOTOOL) gotestsum tool slowest --jsonfile $(TEST_JSON) --num 15

STRESS_RUNS ?= 5

.PHONY: stress
stress: $(HUB_BIN)/.complete ## every package that starts a hub, STRESS_RUNS (5) runs in a row while the whole suite runs beside it (hours); table in bin/stress/table.md
	GOGC=$(TEST_GOGC) hack/stress.sh $(STRESS_RUNS)

BENCH_PKGS ?= ./internal/sp/app/

.PHONY: bench
BENCH_TIME ?= 10s

bench: $(HUB_BIN)/.complete build ## benchmarks (~35 min on a quiet 2-core machine): the SP process on a seeded local hub at 1,000 and 10,000 clusters: open-loop GET/LIST p50/p99/p99.9 at constant rates beside kube-apiserver's, closed-loop at c=1/8, in-process allocations, creates/s, RSS/heap, event latency, start → ready; prints a table (bin/bench-report.md)
	BENCH_SP_BIN=$(CURDIR)/$(BIN) BENCH_REPORT=$(CURDIR)/bin/bench-report.md \
		go test -run '^$$' -bench . -benchtime $(BENCH_TIME) -timeout 150m $(BENCH_PKGS)

.PHONY: bench-compare
bench-compare: $(HUB_BIN)/.complete ## the SP of BASE=<commit> against this tree's under the same benchmarks, alternately, ROUNDS=5 times each at 1,000 clusters; benchstat prints each change with its significance (bin/bench-compare)
	hack/bench-compare.sh $(BASE) $(or $(ROUNDS),5)

.PHONY: chaos
chaos: $(HUB_BIN)/.complete build ## chaos suite (not in make test, ~35 min): two SP processes on the local hub; kill -9, NATS outage, hub faults, API server restart, load; prints a table, fails on any loss
	CHAOS_SP_BIN=$(CURDIR)/$(BIN) CHAOS_REPORT=$(CURDIR)/bin/chaos-report.md CHAOS_LOG_DIR=$(CURDIR)/bin/chaos-logs \
		go test -tags chaos -run TestChaos -v -count=1 -timeout 150m ./internal/devtest/sp/chaos/

# Every chaos scenario at a small size (CI runs it, so the reliability suite cannot rot): a few minutes.
CHAOS_SMOKE := CHAOS_CLUSTERS=12 CHAOS_KILLS=3 CHAOS_OUTAGE_CLUSTERS=8 CHAOS_OUTAGE=10s CHAOS_CYCLES=40 \
	CHAOS_APISERVER_DOWN=5s CHAOS_RESTART_CLUSTERS=8 CHAOS_CHURN=100 CHAOS_LOAD_EXISTING=200 CHAOS_LOAD_CLIENTS=4 \
	CHAOS_LOAD_DURATION=20s

.PHONY: chaos-smoke
chaos-smoke: $(HUB_BIN)/.complete build ## every chaos scenario at a small size (~5 min; CI runs it): fails on any loss, like make chaos
	$(CHAOS_SMOKE) CHAOS_SP_BIN=$(CURDIR)/$(BIN) CHAOS_REPORT=$(CURDIR)/bin/chaos-smoke-report.md CHAOS_LOG_DIR=$(CURDIR)/bin/chaos-smoke-logs \
		go test -tags chaos -run TestChaos -count=1 -timeout 20m ./internal/devtest/sp/chaos/

BENCH_CAPI_TIME ?= 5s

.PHONY: bench-capi
bench-capi: $(HUB_BIN)/.complete ## capi-private proxy vs direct kube-apiserver: GET c=1, GET/LIST(50)/PATCH c=8, LIST 500/1,000/5,000 (heap, RSS), 200 watches; prints a table
	go test -run '^$$' -bench . -benchtime $(BENCH_CAPI_TIME) -timeout 60m ./internal/capiprivate/proxy/hubtest

SPECTRAL := tools/spectral/node_modules/.bin/spectral

$(SPECTRAL): tools/spectral/package.json tools/spectral/package-lock.json
	cd tools/spectral && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: lint-api
lint-api: $(SPECTRAL) ## lint api/v1alpha1/openapi.yaml (Spectral + the AEP-style ruleset in api/.spectral.yaml)
	$(SPECTRAL) lint --ruleset api/.spectral.yaml --fail-severity=warn api/v1alpha1/openapi.yaml

# The build tags of tests that make test does not build (the chaos suite, the translation recorder): lint vets
# them, so they cannot stop compiling unnoticed, and fails on a tag missing from this list.
TEST_TAGS := chaos,record
# go vet and staticcheck compile every dependency with -trimpath, as make build does, so that a cold CI compiles
# them once for lint and build together instead of once each.

.PHONY: lint
lint: lint-api ## gofmt, go vet (with every test build tag), staticcheck (pinned), and lint-api
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@tags=$$(git grep -h '^//go:build' -- '*_test.go' | sed 's|^//go:build||' | grep -oE '[a-z_0-9]+' | sort -u || true); \
	 for tag in $$tags; do case ",$(TEST_TAGS)," in *",$$tag,"*) ;; *) echo "build tag $$tag is not in TEST_TAGS: lint would not vet it"; exit 1;; esac; done
	go vet -trimpath -tags $(TEST_TAGS) ./...
	GOFLAGS='$(GOFLAGS) -trimpath' $(GOTOOL) staticcheck -tags $(TEST_TAGS) ./...

.PHONY: generate
generate: ## regenerate code from api/v1alpha1/openapi.yaml
	go generate ./...

.PHONY: crds
crds: ## regenerate internal/devtest/sp/sphub/crds from the pinned upstream modules
	hack/crds.sh

.PHONY: capi-crds
capi-crds: ## re-vendor capi-private's upstream CRDs, regenerate its private CRDs (internal/capiprivate/crds) and their install copy (deploy/capi-private/base/crds)
	hack/capi-crds.sh
	hack/capi-deploy-crds.sh

.PHONY: manifests-check
manifests-check: $(HUB_BIN)/.complete ## render deploy/ and deploy/capi-private and their overlays and validate them on a local hub (server-side dry run, strict)
	go run ./hack/manifestscheck

# What the production binaries must not link: the dev/test harness of either product, and (acm-cluster-sp) the
# testing package. capi-private links `testing` through upstream Cluster API's v1beta1 conversions
# (sigs.k8s.io/cluster-api/util/conversion), which its webhook needs. capi-private shares no runtime package with
# the cluster SP (only the leaf packages internal/buildinfo and internal/loopback, and build tooling).
DEV_HARNESS   := sigs.k8s.io/controller-runtime/pkg/envtest|github.com/nats-io/nats-server/v2/server$$|/internal/devtest/|/internal/capiprivate/(crds/upstream|translate/internal/.*)$$
SP_RUNTIME    := ^github.com/dcm-sp/acm-cluster-sp/internal/sp(/.*)?$$

# CAPI_TESTING_VIA are the only packages through which capi-private may link testing: upstream Cluster API's
# util/conversion (imported by the conversions of the v1beta1 API packages capi-private serves) also holds its
# fuzz-test helpers, which import testing directly and through apimachinery's apitesting.
CAPI_TESTING_VIA := sigs.k8s.io/cluster-api/util/conversion|k8s.io/apimachinery/pkg/api/apitesting
.PHONY: check-prod-deps
check-prod-deps: ## fail when a production binary links the dev harness (or, acm-cluster-sp, testing), or capi-private links the SP's runtime
	@bad=$$(go list -deps ./cmd/acm-cluster-sp | grep -E '$(DEV_HARNESS)|^testing$$' || true); \
	 if [ -n "$$bad" ]; then echo "acm-cluster-sp links dev/test code:"; echo "$$bad"; exit 1; fi; \
	 bad=$$(go list -deps ./cmd/capi-private | grep -E '$(DEV_HARNESS)|$(SP_RUNTIME)' || true); \
	 if [ -n "$$bad" ]; then echo "capi-private links dev/test code or the cluster SP's runtime:"; echo "$$bad"; exit 1; fi; \
	 bad=$$(go list -deps -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' ./cmd/capi-private | \
	   awk '{for (i = 2; i <= NF; i++) if ($$i == "testing") print $$1}' | grep -vxE '$(CAPI_TESTING_VIA)' || true); \
	 if [ -n "$$bad" ]; then echo "capi-private links testing other than through upstream Cluster API's conversion helpers:"; echo "$$bad"; exit 1; fi; \
	 echo "production binaries link no dev harness; capi-private links none of the SP's runtime, and testing only through upstream Cluster API"

.PHONY: verify-capi-crds
verify-capi-crds: ## fail when capi-private's vendored upstream CRDs, generated private CRDs or their install copy are stale
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	 hack/capi-crds.sh $$tmp >/dev/null && \
	 diff -r -x '*.go' $$tmp/upstream internal/capiprivate/crds/upstream && \
	 diff -r $$tmp/private internal/capiprivate/crds/private && \
	 hack/capi-deploy-crds.sh $$tmp/deploy >/dev/null && \
	 diff -r $$tmp/deploy deploy/capi-private/base/crds && echo "capi-private CRDs current (make capi-crds)"

.PHONY: verify
verify: verify-capi-crds ## fail when generated code or CRDs are stale
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	 hack/crds.sh $$tmp/crds >/dev/null && diff -r $$tmp/crds internal/devtest/sp/sphub/crds && echo "CRDs current"
	@$(MAKE) --no-print-directory generate >/dev/null && \
	 if [ -n "$$(git status --porcelain -- api pkg internal docs)" ]; then echo "generated code is stale: run make generate"; git status --porcelain -- api pkg internal docs; exit 1; fi; \
	 echo "generated code current"
