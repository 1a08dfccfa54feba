# wasmstream — build, test and run.
#
#   make test        everything CI runs: vet, the hermetic suite (kfake), then the
#                    integration suite against a real Kafka broker that this target
#                    starts (scripts/kafka.sh) and always stops. Needs Go, Java 17+, Maven.
#   make test-fast   the hermetic suite only: go test ./... (embedded kfake broker)
#   make demo        go run ./cmd/wasmstream demo
#   make check       gofmt, vet (native and wasip1), go mod tidy, the demo plugins up to date
#   make bench       the per-record benchmarks
#   make chaos       only the process-level crash, fencing and rebalance-storm tests
#                    (internal/chaos; make test runs them too, after the rest)
#   make kafka-up / kafka-down   a real broker on 127.0.0.1:19092 for local development

SHELL := /bin/bash
GO ?= go
KAFKA_ADDR ?= 127.0.0.1:19092
# Packages whose tests take their broker from internal/testbroker: the
# integration suite, run a second time against the real broker.
# The process-level chaos tests (internal/chaos) run last and alone: they
# start several processes each and take minutes.
CHAOS_PKG = github.com/wasmstream/wasmstream/internal/chaos
INTEGRATION_PKGS = $(shell $(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | grep 'internal/testbroker' | grep -v '^github.com/wasmstream/wasmstream/internal/testbroker ' | cut -d' ' -f1 | grep -v '^$(CHAOS_PKG)$$'; echo github.com/wasmstream/wasmstream/internal/testbroker)
UNIT_PKGS = $(shell $(GO) list ./... | grep -v '^$(CHAOS_PKG)$$')
TEST_FLAGS ?= -count=1 -timeout 20m
PLUGINS = passthrough filter route mask wordcount

.PHONY: all build test test-fast test-real vet check bench demo plugins demo-plugins kafka-up kafka-down testdata chaos

all: build

build:
	$(GO) build -o bin/wasmstream ./cmd/wasmstream

vet:
	$(GO) vet ./...
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./sdk/... ./plugins/...

test: vet test-fast test-real

test-fast:
	@echo "=== hermetic suite (embedded kfake broker) ==="
	$(GO) test $(TEST_FLAGS) $(UNIT_PKGS)
	@echo "=== process-level chaos tests (kfake) ==="
	$(GO) test $(TEST_FLAGS) $(CHAOS_PKG)

# The same integration tests against real Apache Kafka. The broker is stopped
# whatever the tests do; the exit status is the tests'. Tests that restart the
# shared broker have "Restart" in their name and run alone, after the rest.
test-real:
	@echo "=== integration suite against real Apache Kafka ($(KAFKA_ADDR)) ==="
	@mkdir -p .cache
	scripts/kafka.sh start
	@set -o pipefail; status=0; \
	{ WASMSTREAM_TEST_BROKERS=$(KAFKA_ADDR) $(GO) test $(TEST_FLAGS) -v -skip Restart $(INTEGRATION_PKGS) && \
	  WASMSTREAM_TEST_BROKERS=$(KAFKA_ADDR) $(GO) test $(TEST_FLAGS) -v -p 1 -run Restart $(INTEGRATION_PKGS) && \
	  WASMSTREAM_TEST_BROKERS=$(KAFKA_ADDR) $(GO) test $(TEST_FLAGS) -v $(CHAOS_PKG); } 2>&1 \
	  | tee .cache/test-real.log | grep -E '^(--- |ok |FAIL|PASS$$|panic:)' || status=$$?; \
	scripts/kafka.sh stop; \
	if [ $$status -ne 0 ]; then echo "integration suite failed against real Kafka; full log: .cache/test-real.log"; \
	  grep -B2 -A30 -E -- '--- FAIL|panic:' .cache/test-real.log | tail -200; fi; \
	exit $$status

check: vet
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || (echo "gofmt needed"; exit 1)
	$(GO) mod tidy -diff

# Process-level chaos tests alone (SIGKILL, SIGSTOP, rebalance storms).
# Against real Kafka: make kafka-up, then
# WASMSTREAM_TEST_BROKERS=$(KAFKA_ADDR) make chaos
chaos:
	$(GO) test -count=1 -timeout 20m -v ./internal/chaos/

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./host/internal/engine/ ./host/internal/runner/

demo:
	$(GO) run ./cmd/wasmstream demo

plugins:
	@mkdir -p bin/plugins
	for p in $(PLUGINS); do GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o bin/plugins/$$p.wasm ./plugins/$$p || exit 1; done

# The demo embeds prebuilt plugins so that `wasmstream demo` needs no Go
# toolchain; rebuild them after changing the plugins or the SDK.
demo-plugins:
	for p in mask wordcount; do GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags=-s -o internal/demo/plugins/$$p.wasm ./plugins/$$p || exit 1; done

kafka-up:
	scripts/kafka.sh start

kafka-down:
	scripts/kafka.sh stop

# Side-by-side word count against Kafka Streams 4.1.1 on a real broker of its
# own (127.0.0.1:19192, started and stopped by scripts/bench/kstreams.sh).
# Needs Go, Java 17+, Maven. The table is printed and written to .cache/bench/.
#   make bench-kstreams                 the full size (500,000 lines x 8 words, 4 partitions)
#   make bench-kstreams QUICK=1         20,000 lines: checks the harness end to end
#   make bench-kstreams BENCH_ARGS='-repeats 3 -configs ks-cache-on,wasmstream'
.PHONY: bench-kstreams
bench-kstreams: build plugins
	timeout 900 mvn -q -B -f scripts/bench/kstreams/pom.xml package
	$(GO) build -o bin/benchkit ./internal/benchkit
	QUICK=$(QUICK) scripts/bench/kstreams.sh $(BENCH_ARGS)
