# scripts/ownbroker.sh — sourced (not run) by the scripts that need a Kafka
# broker of their own on 127.0.0.1 (scripts/soak.sh, scripts/failover.sh,
# scripts/bench/kstreams.sh): it starts one through scripts/kafka.sh on the
# ports and home they give, and stops it when the calling script exits,
# whatever happens.
#
#   source scripts/ownbroker.sh
#   own_broker NAME PORT CONTROLLER_PORT SASL_PORT HOME
#
# NAME is the calling script's, for messages. The WASMSTREAM_KAFKA_*
# variables are set for scripts/kafka.sh alone: wasmstream reads
# WASMSTREAM_* from its environment as config, so they must not reach the
# processes the script starts. The caller must not exec its last command:
# the EXIT trap has to run after it.

own_broker() {
	OWN_BROKER_NAME=$1 OWN_BROKER_PORT=$2 OWN_BROKER_CPORT=$3 OWN_BROKER_SPORT=$4 OWN_BROKER_HOME=$5
	# The broker jars: reuse those scripts/kafka.sh resolved for the test
	# suite (same pom, same checksum) rather than asking Maven again.
	if [[ ! -f $OWN_BROKER_HOME/libs/.pom.sha256 && -f .cache/kafka/libs/.pom.sha256 ]]; then
		mkdir -p "$OWN_BROKER_HOME"
		cp -r .cache/kafka/libs "$OWN_BROKER_HOME/libs"
	fi
	trap own_broker_stop EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	own_broker_kafka start
}

# own_broker_kafka runs scripts/kafka.sh for the broker own_broker started.
own_broker_kafka() {
	WASMSTREAM_KAFKA_PORT=$OWN_BROKER_PORT WASMSTREAM_KAFKA_CONTROLLER_PORT=$OWN_BROKER_CPORT \
		WASMSTREAM_KAFKA_SASL_PORT=$OWN_BROKER_SPORT WASMSTREAM_KAFKA_HOME=$OWN_BROKER_HOME \
		scripts/kafka.sh "$@"
}

own_broker_stop() {
	own_broker_kafka stop ||
		echo "$OWN_BROKER_NAME: could not stop the broker at 127.0.0.1:$OWN_BROKER_PORT (data and pid file in $OWN_BROKER_HOME)" >&2
}
