#!/usr/bin/env bash
# scripts/kafka.sh — a real single-node Apache Kafka 4.1.1 (KRaft, broker and
# controller in one JVM) on 127.0.0.1, for the integration tests that run
# against real Kafka (WASMSTREAM_TEST_BROKERS=127.0.0.1:19092, see
# internal/testbroker).
#
#   scripts/kafka.sh start      fresh cluster: wipes the data dir, formats, starts, waits until ready
#   scripts/kafka.sh stop       SIGTERM, then SIGKILL after WASMSTREAM_KAFKA_STOP_TIMEOUT; harmless if not running
#   scripts/kafka.sh status     exit 0 and print the address if running, exit 1 otherwise
#   scripts/kafka.sh restart    stop, then start again on the SAME data dir (data survives)
#   scripts/kafka.sh logs [N]   last N (default 100) lines of the broker log
#
# The broker jars come from Maven Central through scripts/kafka/pom.xml; they
# are resolved once into $WASMSTREAM_KAFKA_HOME/libs and resolved again only
# when the pom changes (its sha256 is stored beside the jars).
#
# Environment (all optional):
#   WASMSTREAM_KAFKA_HOME              cache, data and logs (default <repo>/.cache/kafka)
#   WASMSTREAM_KAFKA_PORT              client listener port (default 19092)
#   WASMSTREAM_KAFKA_CONTROLLER_PORT   KRaft controller port (default 19093)
#   WASMSTREAM_KAFKA_SASL_PORT         SASL_SSL listener port (default 19094)
#   WASMSTREAM_KAFKA_START_TIMEOUT     seconds to wait for the broker to be ready (default 90)
#   WASMSTREAM_KAFKA_STOP_TIMEOUT      seconds to wait after SIGTERM before SIGKILL (default 30)
#   WASMSTREAM_KAFKA_MVN_TIMEOUT       seconds allowed for the one-time jar download (default 900)
#   WASMSTREAM_KAFKA_HEAP_OPTS         JVM heap flags (default "-Xms256m -Xmx1g")
#
# Besides the PLAINTEXT listener, the broker has a SASL_SSL listener on
# 127.0.0.1:$WASMSTREAM_KAFKA_SASL_PORT for the TLS and SASL tests
# (host/internal/kafkasec): a fresh start makes a CA and a broker certificate
# for 127.0.0.1/localhost with openssl, and a SCRAM-SHA-256 and -512 user with
# a random password at format time (kafka-storage --add-scram). They are in
# $WASMSTREAM_KAFKA_HOME/tls: ca.pem, scram-user, scram-password.
#
# Every failure prints one line starting with "kafka.sh:" to stderr and exits
# non-zero; nothing waits without a bound.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
POM="$REPO/scripts/kafka/pom.xml"
LOG4J="$REPO/scripts/kafka/log4j2.properties"

KHOME="${WASMSTREAM_KAFKA_HOME:-$REPO/.cache/kafka}"
# The ports are below Linux's ephemeral range (32768-60999), so no outgoing
# connection or test listener on a random port can take them first.
PORT="${WASMSTREAM_KAFKA_PORT:-19092}"
CPORT="${WASMSTREAM_KAFKA_CONTROLLER_PORT:-19093}"
SPORT="${WASMSTREAM_KAFKA_SASL_PORT:-19094}"
START_TIMEOUT="${WASMSTREAM_KAFKA_START_TIMEOUT:-90}"
STOP_TIMEOUT="${WASMSTREAM_KAFKA_STOP_TIMEOUT:-30}"
MVN_TIMEOUT="${WASMSTREAM_KAFKA_MVN_TIMEOUT:-900}"
HEAP_OPTS="${WASMSTREAM_KAFKA_HEAP_OPTS:--Xms256m -Xmx1g}"

LIBS="$KHOME/libs"
DATA="$KHOME/data"
LOGS="$KHOME/logs"
LOG="$LOGS/server.log"       # written by log4j2 (scripts/kafka/log4j2.properties)
OUT="$LOGS/kafka.out"        # the JVM's own stdout/stderr: crashes before logging starts
PROPS="$KHOME/server.properties"
PIDFILE="$KHOME/kafka.pid"
LOCKFILE="$KHOME/.lock"
ADDR="127.0.0.1:$PORT"
TLSDIR="$KHOME/tls"
SCRAM_USER=wasmstream

die() {
	echo "kafka.sh: $*" >&2
	exit 1
}

# now_ms prints the wall clock in milliseconds (bash 5 EPOCHREALTIME, no forks).
now_ms() {
	local t=${EPOCHREALTIME/./}
	echo $((t / 1000))
}

# secs formats a duration in milliseconds as seconds with one decimal.
secs() {
	printf '%d.%d' $(($1 / 1000)) $((($1 % 1000) / 100))
}

check_env() {
	local pair name value
	for pair in WASMSTREAM_KAFKA_PORT=$PORT WASMSTREAM_KAFKA_CONTROLLER_PORT=$CPORT WASMSTREAM_KAFKA_SASL_PORT=$SPORT \
		WASMSTREAM_KAFKA_START_TIMEOUT=$START_TIMEOUT WASMSTREAM_KAFKA_STOP_TIMEOUT=$STOP_TIMEOUT \
		WASMSTREAM_KAFKA_MVN_TIMEOUT=$MVN_TIMEOUT; do
		name=${pair%%=*}
		value=${pair#*=}
		[[ $value =~ ^[1-9][0-9]*$ ]] || die "invalid $name=$value: want a positive integer"
	done
	((PORT <= 65535)) || die "invalid WASMSTREAM_KAFKA_PORT=$PORT: want a port number"
	((CPORT <= 65535)) || die "invalid WASMSTREAM_KAFKA_CONTROLLER_PORT=$CPORT: want a port number"
	((SPORT <= 65535)) || die "invalid WASMSTREAM_KAFKA_SASL_PORT=$SPORT: want a port number"
	((PORT != CPORT)) || die "WASMSTREAM_KAFKA_PORT and WASMSTREAM_KAFKA_CONTROLLER_PORT are both $PORT"
	((SPORT != PORT && SPORT != CPORT)) || die "WASMSTREAM_KAFKA_SASL_PORT=$SPORT is also the client or controller port"
}

# port_open succeeds when something accepts TCP connections on 127.0.0.1:$1.
port_open() {
	timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# port_owner prints " (NAME, pid N)" for the listener on port $1 when ss can tell.
port_owner() {
	local who
	who=$(ss -Hltnp "( sport = :$1 )" 2>/dev/null |
		sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\).*/\1, pid \2/p' | head -n 1 || true)
	[[ -n $who ]] && printf ' (%s)' "$who"
	return 0
}

# broker_pid prints the pid from the pid file when that process is alive and is
# our broker (its command line names our server.properties). A pid that was
# reused by another program, or a zombie, does not count.
broker_pid() {
	[[ -f $PIDFILE ]] || return 1
	local pid args
	pid=$(<"$PIDFILE")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	args=$(ps -ww -o args= -p "$pid" 2>/dev/null) || return 1
	[[ $args == *"kafka.Kafka $PROPS"* ]] || return 1
	echo "$pid"
}

require_java() {
	command -v java >/dev/null 2>&1 || die "java not found on PATH (Kafka 4.1.1 needs Java 17 or newer)"
	local line version major
	line=$(java -version 2>&1 | grep -m 1 version || java -version 2>&1 | head -n 1 || true)
	version=$(sed -n 's/.*version "\([^"]*\)".*/\1/p' <<<"$line")
	major=${version%%.*}
	if [[ $major == 1 ]]; then # 1.8.0_x style
		major=$(cut -d. -f2 <<<"$version")
	fi
	[[ $major =~ ^[0-9]+$ ]] || die "cannot tell the Java version from 'java -version': ${line:-no output}"
	((major >= 17)) || die "java $version is too old: Kafka 4.1.1 needs Java 17 or newer"
}

# ensure_libs resolves the broker jars into $LIBS unless they are there already
# for the current pom. Jars land in a temporary dir first so an interrupted
# download never looks complete.
ensure_libs() {
	local want
	want=$(sha256sum "$POM" | cut -d' ' -f1)
	if [[ -f $LIBS/.pom.sha256 && $(<"$LIBS/.pom.sha256") == "$want" ]]; then
		return 0
	fi
	command -v mvn >/dev/null 2>&1 || die "mvn not found on PATH (needed once to download the Kafka jars into $LIBS)"
	local tmp="$KHOME/libs.tmp" t0
	rm -rf "$tmp"
	t0=$(now_ms)
	echo "kafka.sh: resolving Kafka jars with Maven into $LIBS (once; log: $KHOME/mvn.log)"
	if ! timeout "$MVN_TIMEOUT" mvn -q -B -f "$POM" dependency:copy-dependencies \
		-DoutputDirectory="$tmp" >"$KHOME/mvn.log" 2>&1 </dev/null; then
		tail -n 20 "$KHOME/mvn.log" >&2
		die "mvn could not resolve the Kafka jars within ${MVN_TIMEOUT}s (full output: $KHOME/mvn.log)"
	fi
	compgen -G "$tmp/kafka_2.13-*.jar" >/dev/null || die "mvn finished but $tmp holds no kafka_2.13 jar"
	echo "$want" >"$tmp/.pom.sha256"
	rm -rf "$LIBS"
	mv "$tmp" "$LIBS"
	echo "kafka.sh: jars resolved in $(secs $(($(now_ms) - t0)))s"
}

# write_props writes the single-node KRaft configuration. Everything that makes
# tests slow by default (rebalance delay, 30 s initial retention delay, 5 min
# retention checks, 10 s abort of timed-out transactions, 45 s KIP-848 session)
# is turned down.
write_props() {
	cat >"$PROPS" <<EOF
# Generated by scripts/kafka.sh; rewritten on every start and restart.
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT,SASL_SSL://127.0.0.1:$SPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT,SASL_SSL://127.0.0.1:$SPORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
controller.quorum.bootstrap.servers=127.0.0.1:$CPORT
log.dirs=$DATA

# SASL_SSL: TLS with the certificate gen_tls made, SCRAM users created at
# format time (format_storage). No authorizer: an authenticated user may do
# anything, as on the PLAINTEXT listener.
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.type=PKCS12
listener.name.sasl_ssl.ssl.keystore.location=$TLSDIR/broker.p12
listener.name.sasl_ssl.ssl.keystore.password=$(<"$TLSDIR/keystore-password")

# One node: every replication factor and min ISR is 1.
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
# Fewer internal partitions: faster first group/transaction coordinator load.
offsets.topic.num.partitions=10
transaction.state.log.num.partitions=10

# Tests create every topic they use, explicitly.
auto.create.topics.enable=false
num.partitions=1

# Groups: no initial rebalance delay; KIP-848 members heartbeat every 0.5 s and
# are expired after 10 s (defaults 5 s / 45 s).
group.initial.rebalance.delay.ms=0
group.coordinator.rebalance.protocols=classic,consumer
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=500
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=10000

# Retention and segments: check every second, starting 1 s after startup
# (defaults 5 min and 30 s), and delete removed segment files after 1 s.
# Segments are at least 1 MiB; tests roll small segments with topic segment.ms.
log.retention.check.interval.ms=1000
log.initial.task.delay.ms=1000
log.segment.delete.delay.ms=1000
log.cleaner.backoff.ms=1000

# Transactions: abort timed-out transactions within ~1 s of their timeout
# (default check every 10 s).
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
EOF
}

# cluster_id prints a random Kafka Uuid: 16 random bytes in unpadded URL-safe
# base64. Kafka's own generator avoids a leading '-', which would read as a flag.
cluster_id() {
	local id
	while :; do
		id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
		[[ $id != -* ]] && break
	done
	echo "$id"
}

# gen_tls makes, in $TLSDIR, a CA (ca.pem), a broker certificate for
# 127.0.0.1 and localhost signed by it (broker.p12, PKCS12 with a random
# password), and the SCRAM user's random password. Valid for 30 days; a fresh
# start makes new ones.
gen_tls() {
	command -v openssl >/dev/null 2>&1 || die "openssl not found on PATH (needed for the SASL_SSL listener's certificates)"
	local tmp="$TLSDIR.tmp"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	if ! (
		cd "$tmp" &&
			openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=wasmstream test CA" \
				-keyout ca.key -out ca.pem &&
			openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout broker.key -out broker.csr &&
			printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >broker.ext &&
			openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
				-extfile broker.ext -out broker.pem &&
			openssl rand -hex 16 >keystore-password &&
			openssl pkcs12 -export -in broker.pem -inkey broker.key -certfile ca.pem -name broker \
				-passout "file:keystore-password" -out broker.p12 &&
			echo "$SCRAM_USER" >scram-user &&
			openssl rand -hex 16 >scram-password
	) >"$KHOME/openssl.log" 2>&1; then
		tail -n 20 "$KHOME/openssl.log" >&2
		die "making the SASL_SSL certificates failed (full output: $KHOME/openssl.log)"
	fi
	rm -rf "$TLSDIR"
	mv "$tmp" "$TLSDIR"
}

format_storage() {
	local id pw
	id=$(cluster_id)
	pw=$(<"$TLSDIR/scram-password")
	if ! java -cp "$LIBS/*" kafka.tools.StorageTool format -t "$id" -c "$PROPS" --standalone \
		--add-scram "SCRAM-SHA-256=[name=$SCRAM_USER,password=$pw]" \
		--add-scram "SCRAM-SHA-512=[name=$SCRAM_USER,password=$pw]" \
		>"$LOGS/format.log" 2>&1 </dev/null; then
		tail -n 20 "$LOGS/format.log" >&2
		die "formatting $DATA failed (full output: $LOGS/format.log)"
	fi
}

# kill_pid stops process $1: SIGTERM, up to $2 seconds, then SIGKILL. It
# returns once the process is gone (or, after SIGKILL, at most 10 s later).
kill_pid() {
	local pid=$1 grace=$2 deadline
	kill -TERM "$pid" 2>/dev/null || true
	deadline=$(($(now_ms) + grace * 1000))
	while broker_pid >/dev/null && (($(now_ms) < deadline)); do
		sleep 0.2
	done
	if broker_pid >/dev/null; then
		echo "kafka.sh: broker (pid $pid) still running ${grace}s after SIGTERM; sending SIGKILL" >&2
		kill -KILL "$pid" 2>/dev/null || true
		deadline=$(($(now_ms) + 10000))
		while broker_pid >/dev/null && (($(now_ms) < deadline)); do
			sleep 0.2
		done
	fi
}

stop_broker() {
	local pid t0
	if ! pid=$(broker_pid); then
		rm -f "$PIDFILE"
		echo "kafka.sh: not running"
		return 0
	fi
	t0=$(now_ms)
	kill_pid "$pid" "$STOP_TIMEOUT"
	broker_pid >/dev/null && die "broker (pid $pid) survived SIGKILL"
	rm -f "$PIDFILE"
	echo "kafka.sh: stopped (pid $pid) in $(secs $(($(now_ms) - t0)))s"
}

# fail_start reports why the broker did not come up, shows its log, makes sure
# it is gone, and exits non-zero.
fail_start() {
	local pid=$1 reason=$2
	if [[ -s $LOG ]]; then
		echo "kafka.sh: $reason; last 40 lines of $LOG:" >&2
		tail -n 40 "$LOG" >&2
	else
		echo "kafka.sh: $reason; $LOG is empty" >&2
	fi
	if [[ -s $OUT ]]; then
		echo "kafka.sh: last 20 lines of $OUT:" >&2
		tail -n 20 "$OUT" >&2
	fi
	kill_pid "$pid" 5
	rm -f "$PIDFILE"
	die "$reason"
}

# start_broker starts the broker; $1 = fresh (wipe and format) or keep (reuse
# the data dir; formats only if there is none yet).
start_broker() {
	local mode=$1 pid

	if pid=$(broker_pid); then
		if port_open "$PORT"; then
			echo "kafka.sh: already running at $ADDR (pid $pid)"
			return 0
		fi
		echo "kafka.sh: broker pid $pid is alive but $ADDR does not answer; stopping it first" >&2
		stop_broker
	fi
	rm -f "$PIDFILE"

	require_java
	local p
	for p in "$PORT" "$CPORT" "$SPORT"; do
		if port_open "$p"; then
			die "port 127.0.0.1:$p is already in use by another process$(port_owner "$p")"
		fi
	done
	ensure_libs

	if [[ $mode == fresh || ! -f $DATA/meta.properties ]]; then
		rm -rf "$DATA" "$LOGS"
		mkdir -p "$DATA" "$LOGS"
		gen_tls
		write_props
		format_storage
	else
		mkdir -p "$LOGS"
		[[ -f $TLSDIR/keystore-password ]] || die "$TLSDIR is missing: the data dir was formatted without it (run scripts/kafka.sh start for a fresh cluster)"
		write_props
	fi

	# Only log lines written after this offset count as this start's.
	local offset=0
	[[ -f $LOG ]] && offset=$(stat -c %s "$LOG")

	local t0 deadline
	t0=$(now_ms)
	deadline=$((t0 + START_TIMEOUT * 1000))
	# setsid: the broker outlives this script and the terminal or test that ran
	# it; its stdio goes to files so no caller waits on an inherited pipe, and
	# fd 9 (our lock) is closed for it.
	# shellcheck disable=SC2086 # HEAP_OPTS is a list of JVM flags
	setsid java $HEAP_OPTS -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
		-Dkafka.logs.dir="$LOGS" -Dlog4j2.configurationFile="$LOG4J" \
		-cp "$LIBS/*" kafka.Kafka "$PROPS" </dev/null >>"$OUT" 2>&1 9>&- &
	pid=$!
	echo "$pid" >"$PIDFILE"
	trap 'fail_start "$pid" "interrupted while waiting for the broker"' INT TERM

	while :; do
		if ! broker_pid >/dev/null; then
			local rc=0
			wait "$pid" 2>/dev/null || rc=$?
			fail_start "$pid" "broker process $pid died during startup (exit status $rc)"
		fi
		if tail -c +$((offset + 1)) "$LOG" 2>/dev/null | grep -q 'Kafka Server started' && port_open "$PORT" && port_open "$SPORT"; then
			break
		fi
		if (($(now_ms) > deadline)); then
			fail_start "$pid" "broker not up within ${START_TIMEOUT}s"
		fi
		sleep 0.2
	done
	trap - INT TERM
	echo "kafka.sh: broker up at $ADDR, SASL_SSL at 127.0.0.1:$SPORT (CA and SCRAM user in $TLSDIR), in $(secs $(($(now_ms) - t0)))s (pid $pid, data $DATA, log $LOG)"
}

lock() {
	mkdir -p "$KHOME"
	exec 9>"$LOCKFILE"
	# A start may include the one-time jar download; wait for it, boundedly.
	flock -w $((MVN_TIMEOUT + START_TIMEOUT + STOP_TIMEOUT)) 9 ||
		die "another kafka.sh holds $LOCKFILE for too long"
}

usage() {
	echo "usage: scripts/kafka.sh start|stop|status|restart|logs [lines]" >&2
	exit 2
}

main() {
	[[ $# -ge 1 ]] || usage
	check_env
	case $1 in
	start)
		lock
		start_broker fresh
		;;
	restart)
		lock
		stop_broker
		start_broker keep
		;;
	stop)
		lock
		stop_broker
		;;
	status)
		local pid
		if pid=$(broker_pid) && port_open "$PORT"; then
			echo "running at $ADDR (pid $pid)"
			exit 0
		elif pid=$(broker_pid); then
			echo "not ready: pid $pid is alive but $ADDR does not answer" >&2
			exit 1
		fi
		echo "not running" >&2
		exit 1
		;;
	logs)
		local n=${2:-100}
		[[ $n =~ ^[0-9]+$ ]] || usage
		[[ -f $LOG ]] || die "no broker log at $LOG"
		tail -n "$n" "$LOG"
		;;
	*)
		usage
		;;
	esac
}

main "$@"
