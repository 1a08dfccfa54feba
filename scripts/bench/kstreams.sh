#!/usr/bin/env bash
# scripts/bench/kstreams.sh — the side-by-side word count benchmark of
# wasmstream against Kafka Streams on a real broker of its own. Run it
# through `make bench-kstreams` (which builds what it needs first):
#
#   make bench-kstreams                      500,000 lines of 8 words, 4 partitions, every configuration
#   make bench-kstreams QUICK=1              20,000 lines: an end-to-end check of the harness, ~3-5 min
#   make bench-kstreams BENCH_ARGS='-repeats 3 -guarantees exactly_once -layouts any'
#   make bench-kstreams BENCH_ARGS='-configs ks-cache-on,wasmstream-general-commit'   one matched pair
#   make bench-kstreams BENCH_ARGS='-configs wasmstream-general-commit -repeats 3 -baseline OLD_BINARY'
#                                            an A/B of two wasmstream builds on one broker (separate
#                                            sessions each start a fresh broker: too noisy to compare)
#
# Configurations: internal/benchkit/configs.go (the Makefile lists them),
# with the I/O floor (bin/benchkit floor) among them.
#
# Arguments are passed to the harness (go run ./internal/benchkit -h lists
# them); QUICK=1 in the environment adds -quick. The broker is started fresh
# (scripts/kafka.sh, its own data dir and ports) and stopped when this script
# ends, whatever happens. Every wait is bounded.
#
# Environment (all optional):
#   WASMSTREAM_BENCH_KAFKA_PORT             client port of the benchmark's broker (default 19192)
#   WASMSTREAM_BENCH_KAFKA_CONTROLLER_PORT  its controller port (default 19193)
#   WASMSTREAM_BENCH_KAFKA_SASL_PORT        its SASL_SSL listener, unused here but opened by scripts/kafka.sh
#                                           (default 19194, so that a development broker's 19094 does not collide)
#   WASMSTREAM_BENCH_KAFKA_HOME             its jars, data and logs (default <repo>/.cache/bench/kafka)
#   WASMSTREAM_KAFKA_HEAP_OPTS              the broker's heap (scripts/kafka.sh; default -Xms256m -Xmx1g)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"

PORT="${WASMSTREAM_BENCH_KAFKA_PORT:-19192}"
CPORT="${WASMSTREAM_BENCH_KAFKA_CONTROLLER_PORT:-19193}"
SPORT="${WASMSTREAM_BENCH_KAFKA_SASL_PORT:-19194}"
KHOME="${WASMSTREAM_BENCH_KAFKA_HOME:-$REPO/.cache/bench/kafka}"

die() {
	echo "kstreams.sh: $*" >&2
	exit 1
}

for f in bin/benchkit bin/wasmstream bin/plugins/wordcount.wasm bin/plugins/rust/split.wasm bin/plugins/c/split.wasm bin/plugins/c/wordcount.wasm scripts/bench/kstreams/target/wordcount-kstreams.jar; do
	[[ -e $f ]] || die "$f is missing: run make bench-kstreams, which builds it"
done

# shellcheck source=scripts/ownbroker.sh
source scripts/ownbroker.sh
own_broker kstreams.sh "$PORT" "$CPORT" "$SPORT" "$KHOME"

args=()
if [[ ${QUICK:-} == 1 ]]; then
	args+=(-quick)
fi
# No exec: the EXIT trap must run after the harness.
status=0
bin/benchkit -brokers "127.0.0.1:$PORT" -broker-pid-file "$KHOME/kafka.pid" "${args[@]}" "$@" || status=$?
exit "$status"
