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
TEST_FLAGS ?= -timeout 30m
BIN        := bin/acm-cluster-sp

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  make %-16s %s\n", $$1, $$2}'

.PHONY: tools
tools: ## build kube-apiserver, etcd and kubectl into the cache (first time ~8 min; then instant)
	@hack/tools.sh >/dev/null

$(HUB_BIN)/.complete:
	@hack/tools.sh >/dev/null

.PHONY: build
build: ## build bin/acm-cluster-sp with the version stamped in
	go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/acm-cluster-sp

.PHONY: run
run: $(HUB_BIN)/.complete build ## run the service on an embedded local hub (acm-cluster-sp dev)
	./$(BIN) dev $(RUN_ARGS)

.PHONY: test
test: $(HUB_BIN)/.complete ## run every test (unit and integration, on the real local hub)
	go test $(TEST_FLAGS) ./...

BENCH_PKGS ?= ./internal/app/

.PHONY: bench
bench: $(HUB_BIN)/.complete ## benchmarks on the local hub: GET/LIST latency at 1,000 and 10,000 clusters, creates/s, status event latency
	go test -run '^$$' -bench . -benchtime 1x -timeout 60m $(BENCH_PKGS)

SPECTRAL := tools/spectral/node_modules/.bin/spectral

$(SPECTRAL): tools/spectral/package.json tools/spectral/package-lock.json
	cd tools/spectral && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: lint-api
lint-api: $(SPECTRAL) ## lint api/v1alpha1/openapi.yaml (Spectral + the AEP-style ruleset in api/.spectral.yaml)
	$(SPECTRAL) lint --ruleset api/.spectral.yaml --fail-severity=warn api/v1alpha1/openapi.yaml

.PHONY: lint
lint: lint-api ## gofmt, go vet, staticcheck (pinned), and lint-api
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	$(GOTOOL) staticcheck ./...

.PHONY: generate
generate: ## regenerate code from api/v1alpha1/openapi.yaml
	go generate ./...

.PHONY: crds
crds: ## regenerate internal/devhub/crds from the pinned upstream modules
	hack/crds.sh

.PHONY: verify
verify: ## fail when generated code or CRDs are stale
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	 hack/crds.sh $$tmp/crds >/dev/null && diff -r $$tmp/crds internal/devhub/crds && echo "CRDs current"
	@$(MAKE) --no-print-directory generate >/dev/null && \
	 if [ -n "$$(git status --porcelain -- api pkg internal)" ]; then echo "generated code is stale: run make generate"; git status --porcelain -- api pkg internal; exit 1; fi; \
	 echo "generated code current"
