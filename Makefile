# wasmstream — build, test and run.
#
#   make test        everything CI runs: vet, the hermetic suite (kfake), the race
#                    detector over runner, state, restore, engine and host (kfake), then the
#                    integration suite against a real Kafka broker that this target
#                    starts (scripts/kafka.sh: PLAINTEXT on 19092, SASL_SSL on 19094)
#                    and always stops. Needs Go, Java 17+, Maven, openssl.
#   make docs        regenerate docs/config.md from host.Config's comments
#   make docker      the container image (Dockerfile; needs docker)
#   make test-fast   the hermetic suite (embedded kfake broker) and the chaos tests, with the SDK
#                    conformance suite in Go, Rust, C and TypeScript (needs make toolchains); the
#                    host, runner, state and restore packages are left to test-race
#   make test-race   the race detector part of make test alone: host, runner, state, restore
#                    and engine against kfake
#   make toolchains  apt-get install the Rust, C and TypeScript toolchains when missing (root),
#                    and the AssemblyScript compiler into sdk/ts/node_modules (npm ci)
#   make rust-plugins / c-plugins / ts-plugins   the Rust, C and TypeScript plugins into bin/plugins/{rust,c,ts}/
#   make bench-polyglot   the plugins in Go, Rust, C and TypeScript against the wazero floor, and end to end
#   make demo        go run ./cmd/wasmstream demo
#   make check       gofmt, vet (native and wasip1), go mod tidy, staticcheck, and the
#                    policy tests (internal/lint: import boundaries, the host's public
#                    surface, no tracked build outputs, the committed .wasm fixtures
#                    rebuilt from their sources and compared).
#   make demo-plugins   the plugins `wasmstream demo` embeds (make build runs it)
#   make bench       the per-record benchmarks
#   make chaos       only the process-level crash, fencing and rebalance-storm tests
#                    (internal/chaos; make test runs them too, after the rest)
#   make kafka-up / kafka-down   a real broker on 127.0.0.1:19092 for local development
#   make soak        30 minutes of load, hot swaps, rollbacks and a second process
#                    joining and leaving, on a broker of its own; fails when memory
#                    grows with time or swaps (internal/soak). Not part of make test.

SHELL := /bin/bash
GO ?= go
KAFKA_ADDR ?= 127.0.0.1:19092
# The real broker's SASL_SSL listener (scripts/kafka.sh) and the directory of
# its CA and SCRAM user: the TLS/SASL integration tests (host/internal/kafkasec)
# run a pipeline through it. On kfake they use kfake's own TLS and SASL.
KAFKA_SASL_ADDR ?= 127.0.0.1:19094
KAFKA_TLS_DIR ?= $(or $(WASMSTREAM_KAFKA_HOME),$(CURDIR)/.cache/kafka)/tls
REAL_ENV = WASMSTREAM_TEST_BROKERS=$(KAFKA_ADDR) WASMSTREAM_TEST_SASL_BROKERS=$(KAFKA_SASL_ADDR) WASMSTREAM_TEST_SASL_DIR=$(KAFKA_TLS_DIR)
# Packages whose tests take their broker from internal/testbroker: the
# integration suite, run a second time against the real broker.
# The process-level chaos tests (internal/chaos) run last and alone: they
# start several processes each and take minutes.
CHAOS_PKG = github.com/wasmstream/wasmstream/internal/chaos
INTEGRATION_PKGS = $(shell $(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | grep 'internal/testbroker' | grep -v '^github.com/wasmstream/wasmstream/internal/testbroker ' | cut -d' ' -f1 | grep -v '^$(CHAOS_PKG)$$'; echo github.com/wasmstream/wasmstream/internal/testbroker)
# The hermetic suite: every package but the chaos tests and the packages
# make test-race runs (their kfake suite runs there, under -race, and
# against real Kafka in test-real without it). The engine stays here too:
# its measurements of compile memory and time skip themselves under -race.
RACE_ONLY_PKGS = host host/internal/runner host/internal/state host/internal/restore
UNIT_PKGS = $(shell $(GO) list ./... | grep -v '^$(CHAOS_PKG)$$' | grep -v -x -E '$(subst $(space),|,$(addprefix github.com/wasmstream/wasmstream/,$(RACE_ONLY_PKGS)))')
space := $(subst ,, )
TEST_FLAGS ?= -count=1 -timeout 20m
PLUGINS = passthrough filter route mask wordcount split windowcount alert clickjoin enrich

.PHONY: docs docker all build test test-fast test-race test-real vet check bench demo plugins demo-plugins kafka-up kafka-down testdata chaos

all: build

# wasmstream version prints these (cmd/wasmstream/version.go); without them
# it falls back to Go's build info.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS = -X main.version=$(VERSION) -X main.commit=$(COMMIT)

build: demo-plugins
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/wasmstream ./cmd/wasmstream

vet:
	$(GO) vet ./...
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./sdk/... ./plugins/...

test: vet test-fast test-race test-real

test-fast: toolchains
	@echo "=== hermetic suite (embedded kfake broker) ==="
	$(GO) test $(TEST_FLAGS) $(UNIT_PKGS)
	@echo "=== process-level chaos tests (kfake) ==="
	$(GO) test $(TEST_FLAGS) $(CHAOS_PKG)

# The race detector over the packages whose goroutines share the most: the
# host (whole hosts: runners, the control-topic follower, deploys, the
# admin server), the runner (task goroutines, produce promises, group
# callbacks), the state store and its restores, and the engine (the
# watchdog beside every call), against kfake. The host's tests share one
# compilation cache (host/main_test.go): wazero's compiler is about ten
# times slower under -race. The invariants' checks (host/internal/invariants)
# run under it too.
RACE_PKGS = $(addprefix ./,$(addsuffix /,$(RACE_ONLY_PKGS))) ./host/internal/engine/
test-race: toolchains
	@echo "=== race detector (embedded kfake broker) ==="
	$(GO) test -race -count=1 -timeout 40m $(RACE_PKGS)

# The same integration tests against real Apache Kafka. The broker is stopped
# whatever the tests do; the exit status is the tests'. Tests that restart the
# shared broker have "Restart" in their name and run alone, after the rest.
test-real:
	@echo "=== integration suite against real Apache Kafka ($(KAFKA_ADDR)) ==="
	@mkdir -p .cache
	scripts/kafka.sh start
	@set -o pipefail; status=0; \
	{ $(REAL_ENV) $(GO) test $(TEST_FLAGS) -v -skip Restart $(INTEGRATION_PKGS) && \
	  $(REAL_ENV) $(GO) test $(TEST_FLAGS) -v -p 1 -run Restart $(INTEGRATION_PKGS) && \
	  $(REAL_ENV) $(GO) test $(TEST_FLAGS) -v $(CHAOS_PKG); } 2>&1 \
	  | tee .cache/test-real.log | grep -E '^(--- |ok |FAIL|PASS$$|panic:)' || status=$$?; \
	scripts/kafka.sh stop; \
	if [ $$status -ne 0 ]; then echo "integration suite failed against real Kafka; full log: .cache/test-real.log"; \
	  grep -B2 -A30 -E -- '--- FAIL|panic:' .cache/test-real.log | tail -200; fi; \
	exit $$status

check: vet staticcheck
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || (echo "gofmt needed"; exit 1)
	$(GO) mod tidy -diff
	$(GO) test -count=1 ./internal/lint/

# staticcheck at a pinned version, fetched through the Go module proxy and
# cached by the go command. The SDK and the plugins are checked as both
# builds (native and wasip1) merged, so code used by one build only is not
# reported as unused; the rest natively. Its default checks; an exception is
# a //lint:ignore with its reason at the line.
STATICCHECK_VERSION = v0.8.2
STATICCHECK = $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
.PHONY: staticcheck
staticcheck:
	$(STATICCHECK) $$($(GO) list ./... | grep -v -e '/wasmstream/sdk' -e '/wasmstream/plugins')
	printf 'native:\nwasip1: GOOS=wasip1 GOARCH=wasm\n' | $(STATICCHECK) -matrix ./sdk/... ./plugins/...

# Process-level chaos tests alone (SIGKILL, SIGSTOP, rebalance storms).
# Against real Kafka: make kafka-up, then
# WASMSTREAM_TEST_BROKERS=$(KAFKA_ADDR) make chaos
chaos:
	$(GO) test -count=1 -timeout 20m -v ./internal/chaos/

# The disk-filling scenario (a plugin filling its disk) on a real 400 MB tmpfs
# (host/smalldisk_test.go, build tag smalldisk, which `make test` never
# sets). Run as root: it mounts the tmpfs, runs the tests, and unmounts it
# whatever they do. Against real Kafka set WASMSTREAM_TEST_BROKERS.
SMALL_DISK_DIR ?= $(CURDIR)/.cache/small-disk
.PHONY: check-small-disk
check-small-disk:
	mkdir -p $(SMALL_DISK_DIR)
	mount -t tmpfs -o size=400m tmpfs $(SMALL_DISK_DIR)
	trap 'umount $(SMALL_DISK_DIR)' EXIT INT TERM; \
		WASMSTREAM_SMALL_DISK=$(SMALL_DISK_DIR) $(GO) test -tags smalldisk -count=1 -timeout 20m -v -run '^TestSmallDisk' ./host/

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./host/internal/engine/ ./host/internal/runner/

demo:
	$(GO) run ./cmd/wasmstream demo

plugins:
	@mkdir -p bin/plugins
	for p in $(PLUGINS); do GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o bin/plugins/$$p.wasm ./plugins/$$p || exit 1; done

# The demo embeds prebuilt plugins so that `wasmstream demo` needs no Go
# toolchain. Go builds are reproducible (same toolchain, -trimpath, no VCS
# stamp), so rebuilding unchanged sources rewrites the same bytes;
# internal/lint's TestDemoPluginsMatchSources rebuilds them the same way and
# fails while the committed ones are stale.
demo-plugins:
	for p in mask wordcount; do GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 $(GO) build -buildmode=c-shared -trimpath -buildvcs=false -ldflags=-s -o internal/demo/plugins/$$p.wasm ./plugins/$$p || exit 1; done

# docs/config.md from host.Config's doc comments (a test fails while stale).
docs:
	$(GO) generate ./host/

# The container image: a static binary on an empty (scratch) base with CA
# certificates, non-root
# (Dockerfile). Needs docker; IMAGE names the result.
IMAGE ?= wasmstream:$(VERSION)
docker:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE) .

kafka-up:
	scripts/kafka.sh start

kafka-down:
	scripts/kafka.sh stop

# ---- Rust, C and TypeScript: SDKs, plugins, conformance suite (sdk/rust, sdk/c,
# sdk/ts, plugins/rust, plugins/c, plugins/ts, host/internal/conformance). Debian's toolchains, called by full
# path: a rustup toolchain first on PATH usually has no Wasm target. lld-14 is
# listed because Debian's rustc links wasm32 through /usr/bin/rust-lld, a link to
# lld-14 that the packages only recommend (and --no-install-recommends skips).
# wabt (wat2wasm) and python3 rebuild the engine's test modules from their
# sources (internal/lint's TestEngineFixturesMatchSources).
TOOLCHAIN_PKGS = clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32 rustc cargo libstd-rust-dev-wasm32 lld-14 gcc wabt python3
RUST_ENV = RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc CARGO_NET_OFFLINE=true
CARGO = /usr/bin/cargo
WASI_CC = clang-19 --target=wasm32-wasi --sysroot=/usr -isystem /usr/include/wasm32-wasi -L/usr/lib/wasm32-wasi \
	-mexec-model=reactor -O2 -std=c11 -Wall -Wextra -Werror -Wl,-z,stack-size=65536 -Wl,--strip-all -Isdk/c
# binaryen's optimizer (installed with the TypeScript SDK's compiler by
# ts-toolchain) on the Rust and C modules: 8-15 % less guest CPU per record
# (RATIONALE.md, "Rust and C modules go through wasm-opt"; not on Go's,
# where it does not pay). internal/polybuild runs the same flags.
WASM_OPT = $(TS_SDK)/node_modules/.bin/wasm-opt
WASM_OPT_FLAGS = -O3
# split is the first step of bench-kstreams' general word count.
POLY_PLUGINS = passthrough filter wordcount split

.PHONY: toolchains ts-toolchain rust-plugins c-plugins ts-plugins conformance bench-polyglot

# TypeScript (AssemblyScript): node (20 or later) and npm run the compiler
# and the SDK's native tests. The compiler is an npm package that
# sdk/ts/package-lock.json pins (with its dependencies and their
# integrity hashes); npm ci installs it into sdk/ts/node_modules, which
# every TypeScript build of the repository uses (sdk/ts/build.mjs). npm's
# cache is .cache/npm: the init test builds a generated project offline
# from it, as a user's machine builds from its own npm cache.
TS_SDK = sdk/ts
NPM_CACHE = $(CURDIR)/.cache/npm
TS_PLUGINS = passthrough filter wordcount

# Installs what the Rust, C and TypeScript builds need from Debian
# packages, only when one is missing (a fresh CI machine; node and npm are
# looked for as commands, as they may come from elsewhere than Debian);
# needs root for apt-get. Then the AssemblyScript compiler (ts-toolchain).
toolchains:
	@missing=$$(for p in $(TOOLCHAIN_PKGS); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done; \
	  command -v node >/dev/null || echo nodejs; command -v npm >/dev/null || echo npm); \
	if [ -n "$$missing" ]; then \
	  echo "make toolchains: installing" $$missing; \
	  if ! command -v apt-get >/dev/null; then echo "make toolchains: no apt-get; install" $$missing "by hand"; exit 1; fi; \
	  if [ "$$(id -u)" != 0 ]; then echo "make toolchains: need root to apt-get install" $$missing; exit 1; fi; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing || exit 1; \
	fi
	@$(MAKE) --no-print-directory ts-toolchain

# The AssemblyScript compiler, into sdk/ts/node_modules, when it is missing
# or the lockfile changed since it was installed. npm ci installs exactly
# the lockfile (it fails rather than resolve anything anew).
ts-toolchain: $(TS_SDK)/node_modules/.package-lock.json

$(TS_SDK)/node_modules/.package-lock.json: $(TS_SDK)/package-lock.json $(TS_SDK)/package.json
	@major=$$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null); \
	if [ -z "$$major" ] || [ "$$major" -lt 20 ]; then \
	  echo "make toolchains: node 20 or later is needed for the AssemblyScript compiler (found: $$(node --version 2>/dev/null || echo none))"; exit 1; fi
	cd $(TS_SDK) && npm ci --cache $(NPM_CACHE) --prefer-offline --no-audit --no-fund
	@touch $@

rust-plugins: toolchains
	@mkdir -p bin/plugins/rust
	cd plugins/rust && $(RUST_ENV) $(CARGO) build --release --target wasm32-wasi
	for p in $(POLY_PLUGINS); do $(WASM_OPT) $(WASM_OPT_FLAGS) plugins/rust/target/wasm32-wasi/release/$$p.wasm -o bin/plugins/rust/$$p.wasm || exit 1; done

# The C plugins that link the SDK's time too (sdk/c/wasmstream_time.c:
# wordcount's emit: commit uses commit marks); internal/polybuild's
# CPluginSources links the same (its test reads this line).
C_TIME_PLUGINS = wordcount

c-plugins: toolchains
	@mkdir -p bin/plugins/c
	for p in $(POLY_PLUGINS); do \
	  time=; case " $(C_TIME_PLUGINS) " in *" $$p "*) time=sdk/c/wasmstream_time.c;; esac; \
	  $(WASI_CC) -o bin/plugins/c/$$p.wasm plugins/c/$$p/$$p.c sdk/c/wasmstream.c $$time || exit 1; \
	  $(WASM_OPT) $(WASM_OPT_FLAGS) bin/plugins/c/$$p.wasm -o bin/plugins/c/$$p.wasm || exit 1; done

ts-plugins: ts-toolchain
	@mkdir -p bin/plugins/ts
	for p in $(TS_PLUGINS); do node $(TS_SDK)/build.mjs plugins/ts/$$p/$$p.ts -o bin/plugins/ts/$$p.wasm || exit 1; done

# The SDK conformance suite alone: the script in Go, Rust, C and TypeScript
# through the engine, the bundled plugins compared across languages, the
# SDKs' native tests.
conformance: toolchains
	$(GO) test -count=1 -v ./host/internal/conformance/

# Go, Rust, C and TypeScript plugins side by side with the WAT floors (CPU per
# record, one record per call and in batches of 100: ABI version 2),
# and the word count end to end through the host (kfake, or
# WASMSTREAM_TEST_BROKERS for a real broker).
bench-polyglot: toolchains
	$(GO) test -run '^$$' -bench Polyglot -count 5 ./host/internal/conformance/
	$(GO) test -run '^$$' -bench WordcountEndToEnd -benchtime 1x -count 3 ./host/internal/conformance/e2e/

# Fuzzing: each target below for FUZZTIME (default 1m; e.g. make fuzz FUZZTIME=10m).
# `go test` runs the same targets on their seed corpora (testdata/fuzz) in
# every `make test`. A crash leaves its input in testdata/fuzz/<Target>/:
# commit it with the fix, as a regression seed.
FUZZTIME ?= 1m
FUZZ_TARGETS = ./abi:FuzzRecordDecode ./abi:FuzzScanEntry \
	./host/internal/engine:FuzzModuleShape ./host/internal/engine:FuzzInstrument \
	./host/internal/engine:FuzzHostCalls ./host/internal/engine:FuzzCompileBudget \
	./host/internal/control:FuzzManifest ./host/internal/control:FuzzStoreApply \
	./host:FuzzSandbox

# fuzz-sandbox runs only the sandbox fuzzer (a host per case beside a
# healthy processor; host/sandbox_fuzz_test.go), e.g. FUZZTIME=1h.
.PHONY: fuzz fuzz-sandbox
fuzz-sandbox:
	$(GO) test -run '^$$' -fuzz '^FuzzSandbox$$' -fuzztime $(FUZZTIME) ./host/
fuzz:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t##*:}; \
	  echo "=== $$name ($$pkg, $(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; done

# Side-by-side word count against Kafka Streams 4.1.1 on a real broker of its
# own (127.0.0.1:19192, started and stopped by scripts/bench/kstreams.sh).
# Needs Go, Java 17+, Maven and the Debian Rust and C toolchains (make toolchains).
# The table is printed and written to .cache/bench/.
#   make bench-kstreams                 the full size (500,000 lines x 8 words, 4 partitions)
#   make bench-kstreams QUICK=1         20,000 lines: checks the harness end to end
#   make bench-kstreams BENCH_ARGS='-repeats 3 -configs ks-cache-on,wasmstream-general-commit'
#   make bench-kstreams BENCH_ARGS='-repeats 3 -configs wasmstream-general-commit -baseline /tmp/old/wasmstream'
#                                       an A/B of two builds: each wasmstream configuration runs with both,
#                                       next to each other in every round, on one broker
# Configurations (internal/benchkit/configs.go, in run order): wasmstream,
# floor, ks-cache-off, wasmstream-general, -general-rust, -general-c,
# floor-commit, wasmstream-general-commit, ks-cache-on,
# wasmstream-general-rust-commit, -general-c-commit, and -general-latest,
# -general-rust-latest, -general-rust-latest-cache once the binary's config
# accepts them. floor and floor-commit are the I/O floor (bin/benchkit floor:
# the same topology and transactions as a plain franz-go loop).
.PHONY: bench-kstreams
bench-kstreams: build plugins rust-plugins c-plugins
	timeout 900 mvn -q -B -f scripts/bench/kstreams/pom.xml package
	$(GO) build -o bin/benchkit ./internal/benchkit
	QUICK=$(QUICK) scripts/bench/kstreams.sh $(BENCH_ARGS)

# ---- Soak: a process under load and hot swaps for 30 minutes (internal/soak,
# scripts/soak.sh, which starts and stops a broker of its own on 19392).
#   make soak                                    the default: a new distinct build every 2 minutes
#   make soak SOAK_ARGS='-duration 20m -first-deploy 2m -warmup 3m -builds alternate'
.PHONY: soak
# Failover with and without standby replicas: three processes,
# 1 GiB of state, one SIGKILLed under load, on a broker of its own
# (scripts/failover.sh; FAILOVER_ARGS go to internal/failover).
.PHONY: bench-failover
bench-failover: build
	@mkdir -p bin/plugins
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o bin/plugins/failover.wasm ./internal/failover/plugin
	$(GO) build -o bin/failover ./internal/failover
	scripts/failover.sh $(FAILOVER_ARGS)

soak: build
	@mkdir -p bin/plugins
	for p in wordcount passthrough; do GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o bin/plugins/$$p.wasm ./plugins/$$p || exit 1; done
	$(GO) build -o bin/soak ./internal/soak
	scripts/soak.sh $(SOAK_ARGS)
