# Hindsight's build and test entry points. `make test` is what CI runs.

GO        ?= go
CACHE     ?= $(HOME)/.cache/hindsight
WEAVIATE  ?= $(CACHE)/bin/weaviate-server
WEAVIATE_VERSION := v1.39.3
NPM_DIR   := internal/testdeps/npm

.PHONY: all build cross demo test test-short deps npm-deps weaviate chromium vet fmt bench fuzz clean

all: build

build:
	$(GO) build -o bin/ ./cmd/hindsight ./cmd/hindsightd

## cross: both binaries built, and every package vetted (tests included),
## for each supported GOOS/GOARCH pair, one pair at a time, without cgo, so
## that macOS and Windows code cannot rot on a Linux CI machine. Release
## archives (.goreleaser.yaml) are built for the same pairs.
CROSS_PAIRS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64

cross:
	@set -e; for p in $(CROSS_PAIRS); do \
		os=$${p%/*}; arch=$${p#*/}; echo "cross: $$os/$$arch"; \
		GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/hindsight; \
		GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/hindsightd; \
		GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 $(GO) vet ./...; \
	done

## demo: the main job on the embedded default (no external service).
demo: build
	./bin/hindsight demo

## deps: everything the test suite needs that is not Go code: the MCP
## servers from npm, a real Weaviate server built from the Go module proxy,
## and Chromium for the web UI's browser test (installed with apt-get when
## missing and running as root; else that test skips).
deps: npm-deps weaviate chromium

npm-deps: $(NPM_DIR)/node_modules/.package-lock.json

$(NPM_DIR)/node_modules/.package-lock.json: $(NPM_DIR)/package.json $(NPM_DIR)/package-lock.json
	cd $(NPM_DIR) && npm ci --no-audit --no-fund

chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update && apt-get install -y chromium; \
	else \
		echo "chromium not found: the web UI's browser test will skip (apt-get install chromium)"; \
	fi

weaviate: $(WEAVIATE)

$(WEAVIATE):
	GOBIN=$(CACHE)/bin $(GO) install github.com/weaviate/weaviate/cmd/weaviate-server@$(WEAVIATE_VERSION)

## test: the cross-platform check, then the whole suite, race detector on.
test: deps cross
	HINDSIGHT_WEAVIATE_BIN=$(WEAVIATE) $(GO) test -race -timeout 45m ./...

## test-short: unit tests only, no external processes.
test-short:
	$(GO) test -short ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w .

## bench: Go benchmarks (see README, Performance, for the harness).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin
