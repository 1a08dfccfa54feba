#!/usr/bin/env bash
# scripts/soak.sh — make soak: a wasmstream process under steady load, hot
# swapped every 2 minutes, for 30 minutes (internal/soak), on a real broker
# of its own. Run it through `make soak` (which builds what it needs first):
#
#   make soak                                        30 minutes, a new distinct build on every deploy
#   make soak SOAK_ARGS='-duration 20m -first-deploy 2m -warmup 3m -builds alternate'     two builds in turn
#   make soak SOAK_ARGS='-duration 20m -first-deploy 2m -warmup 3m -join-first 3m25s'   a short run: 9 swaps, 8 judged
#
# Arguments go to the driver (go run ./internal/soak -h lists them). The
# broker (scripts/kafka.sh, its own data dir and ports, never the shared
# development broker on 19092) is started fresh and stopped when this
# script ends, whatever happens; its data is wiped at the next start. The
# run's configs, logs, samples (samples.csv) and report (report.txt) are in
# .cache/soak/run.
#
# Environment (all optional):
#   WASMSTREAM_SOAK_KAFKA_PORT             client port of the soak's broker (default 19392)
#   WASMSTREAM_SOAK_KAFKA_CONTROLLER_PORT  its controller port (default 19393)
#   WASMSTREAM_SOAK_KAFKA_SASL_PORT        its SASL_SSL listener, unused here but opened by scripts/kafka.sh (default 19394)
#   WASMSTREAM_SOAK_KAFKA_HOME             its jars, data and logs (default <repo>/.cache/soak/kafka)
#   WASMSTREAM_KAFKA_HEAP_OPTS             the broker's heap (scripts/kafka.sh; default -Xms256m -Xmx1g)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"

PORT="${WASMSTREAM_SOAK_KAFKA_PORT:-19392}"
CPORT="${WASMSTREAM_SOAK_KAFKA_CONTROLLER_PORT:-19393}"
SPORT="${WASMSTREAM_SOAK_KAFKA_SASL_PORT:-19394}"
KHOME="${WASMSTREAM_SOAK_KAFKA_HOME:-$REPO/.cache/soak/kafka}"

die() {
	echo "soak.sh: $*" >&2
	exit 1
}

for f in bin/soak bin/wasmstream bin/plugins/wordcount.wasm bin/plugins/passthrough.wasm; do
	[[ -e $f ]] || die "$f is missing: run make soak, which builds it"
done

# shellcheck source=scripts/ownbroker.sh
source scripts/ownbroker.sh
own_broker soak.sh "$PORT" "$CPORT" "$SPORT" "$KHOME"

# No exec: the EXIT trap must run after the driver.
status=0
bin/soak -brokers "127.0.0.1:$PORT" "$@" || status=$?
exit "$status"
