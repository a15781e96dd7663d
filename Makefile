# Hindsight's build and test entry points. `make test` is what CI runs.

GO        ?= go
CACHE     ?= $(HOME)/.cache/hindsight
WEAVIATE  ?= $(CACHE)/bin/weaviate-server
WEAVIATE_VERSION := v1.39.3
NPM_DIR   := lab/testdeps/npm

.PHONY: all build cross vet-cross release demo test test-short deps npm-deps weaviate chromium vet fmt bench bench-store fuzz clean

all: build

## The build stamp `hindsight --version` prints: the tag (else "dev"), the
## commit, its time in UTC and whether the work tree had changes. Set
## VERSION to override the tag.
VERSION  ?= $(shell git describe --tags 2>/dev/null || echo dev)
COMMIT   := $(shell git rev-parse HEAD 2>/dev/null)
DATE     := $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
MODIFIED := $(shell git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo true)
LDFLAGS  := -X github.com/hindsight-proxy/hindsight/cli.version=$(VERSION) \
	-X github.com/hindsight-proxy/hindsight/cli.commit=$(COMMIT) \
	-X github.com/hindsight-proxy/hindsight/cli.date=$(DATE) \
	-X github.com/hindsight-proxy/hindsight/cli.modified=$(MODIFIED)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/ ./cmd/hindsight ./cmd/hindsightd

## The supported GOOS/GOARCH pairs, the release archives' (.goreleaser.yaml).
CROSS_PAIRS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64

## vet-cross: every package vetted, tests included, for each of VET_PAIRS,
## so that macOS and Windows code cannot rot on a Linux CI machine; make
## test runs it. Our files differ only by system (linux, darwin, windows)
## and by amd64 or not (one assembly file and its fallback), so these three
## pairs type-check every file that a release pair compiles
## (lab/platformcheck holds them to it); each pair vetted cold
## compiles every dependency again, so more pairs would cost minutes.
## Other pairs are vetted without cgo, as released; the host's pair with
## the host's cgo setting, which shares compiled packages with the
## binaries the tests run (no package of ours uses cgo).
VET_PAIRS := linux/amd64 darwin/arm64 windows/amd64
HOST_PAIR = $(shell $(GO) env GOOS)/$(shell $(GO) env GOARCH)

vet-cross:
	@set -e; for p in $(VET_PAIRS); do \
		echo "vet-cross: $$p"; \
		if [ "$$p" = "$(HOST_PAIR)" ]; then cgo=; else cgo=0; fi; \
		GOOS=$${p%/*} GOARCH=$${p#*/} CGO_ENABLED=$$cgo $(GO) vet ./...; \
	done

## cross: both binaries linked for each pair as the release links them
## (stamped, trimmed, without cgo) into dist/GOOS_GOARCH/; the release's
## check, not make test's (vet-cross type-checks the same code).
cross:
	@set -e; for p in $(CROSS_PAIRS); do \
		echo "cross: $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' \
			-o dist/$${p%/*}_$${p#*/}/ ./cmd/hindsight ./cmd/hindsightd; \
	done

## release: the release archives and checksums in dist/, built locally by
## GoReleaser without publishing.
release:
	goreleaser release --snapshot --clean

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

## test: every test, race detector on, after vet-cross; the Weaviate
## server builds in the background meanwhile when it is not cached (see
## .ci/test for the phases). It ends with the slowest tests and packages;
## $(TEST_OUT)/test.json keeps the go test -json events.
TEST_FLAGS ?= -race -timeout 45m
TEST_OUT   ?= bin/test

test: npm-deps chromium
	GO='$(GO)' WEAVIATE='$(WEAVIATE)' TEST_FLAGS='$(TEST_FLAGS)' OUT='$(TEST_OUT)' .ci/test

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

## bench-store: the daemon's experience store at 100k and 1M experiences
## (import, stop, start after a clean stop and after SIGKILL, memory,
## search latency); long. BASELINE=path/to/hindsight adds another build.
STORE_SIZES ?= 100000,1000000
bench-store:
	$(GO) run ./lab/bench/cmd/storescale -sizes $(STORE_SIZES) $(if $(BASELINE),-baseline $(BASELINE))

clean:
	rm -rf bin dist
