#!/usr/bin/env bash
# scripts/failover.sh — make bench-failover: the failover benchmark
# (internal/failover) on a real broker of its own. Run it through
# `make bench-failover`, which builds what it needs first:
#
#   make bench-failover                                         1 GiB of state, standby_replicas 0 then 1, classic group
#   make bench-failover FAILOVER_ARGS='-protocol consumer'      KIP-848 (the broker's session timeout, 45 s by default)
#   make bench-failover FAILOVER_ARGS='-state-bytes 4294967296' 4 GiB
#
# Arguments go to the driver (go run ./internal/failover -h lists them).
# The broker (scripts/kafka.sh, its own data dir and ports, never the
# shared development broker on 19092) is started fresh and stopped when
# this script ends, whatever happens; its data is wiped at the next start.
# Configs, state directories and logs are in .cache/failover/run (removed
# at the start: a run writes several GiB).
#
# Environment (all optional):
#   WASMSTREAM_FAILOVER_KAFKA_PORT             client port of the broker (default 19492)
#   WASMSTREAM_FAILOVER_KAFKA_CONTROLLER_PORT  its controller port (default 19493)
#   WASMSTREAM_FAILOVER_KAFKA_SASL_PORT        its SASL_SSL listener, unused here (default 19494)
#   WASMSTREAM_FAILOVER_KAFKA_HOME             its jars, data and logs (default <repo>/.cache/failover/kafka)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"

PORT="${WASMSTREAM_FAILOVER_KAFKA_PORT:-19492}"
CPORT="${WASMSTREAM_FAILOVER_KAFKA_CONTROLLER_PORT:-19493}"
SPORT="${WASMSTREAM_FAILOVER_KAFKA_SASL_PORT:-19494}"
KHOME="${WASMSTREAM_FAILOVER_KAFKA_HOME:-$REPO/.cache/failover/kafka}"

die() {
	echo "failover.sh: $*" >&2
	exit 1
}

for f in bin/failover bin/wasmstream bin/plugins/failover.wasm; do
	[[ -e $f ]] || die "$f is missing: run make bench-failover, which builds it"
done

rm -rf .cache/failover/run
mkdir -p .cache/failover/run
# shellcheck source=scripts/ownbroker.sh
source scripts/ownbroker.sh
own_broker failover.sh "$PORT" "$CPORT" "$SPORT" "$KHOME"

status=0
bin/failover -brokers "127.0.0.1:$PORT" -work .cache/failover/run "$@" || status=$?
exit "$status"
