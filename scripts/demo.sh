#!/usr/bin/env bash
# demo.sh — the orderflow demo on the local stack (run by `make demo`, after
# `make up`).
#
#   scripts/demo.sh          build, migrate the database (orderflow
#                            migrate), (re)start the worker and the bridge,
#                            publish a demo scenario, check it, publish its
#                            late phase, check again, list the holes its
#                            lost events left in the producer's sequence,
#                            print the outcome; exits non-zero if an
#                            invariant failed or the suspected losses are
#                            not the events the scenario lost
#   scripts/demo.sh stop     stop the worker and the bridge
#   scripts/demo.sh status   print whether they run
#
# The worker and the bridge keep running after the demo, so that the Temporal
# UI shows live orders; `make down` (or `scripts/demo.sh stop`) stops them.
# Binaries, pid files and expected-state files live under
# $ORDERFLOW_DATA/demo (default .data/demo), logs under $ORDERFLOW_DATA/logs.
#
# Tunables (environment): DEMO_ORDERS (200), DEMO_RATE (messages/s, 0 =
# unlimited), DEMO_WAIT (how long the check waits to settle, 3m).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DATA=${ORDERFLOW_DATA:-$ROOT/.data}
DEMO=$DATA/demo
BIN=$DEMO/bin
LOGS=$DATA/logs
ORDERS=${DEMO_ORDERS:-200}
RATE=${DEMO_RATE:-0}
WAIT=${DEMO_WAIT:-3m}
UI=${TEMPORAL_UI:-http://127.0.0.1:8233}
NAMESPACE=${TEMPORAL_NAMESPACE:-default}

WORKER_PID=$DEMO/worker.pid
BRIDGE_PID=$DEMO/bridge.pid
WORKER_LOG=$LOGS/worker.log
BRIDGE_LOG=$LOGS/bridge.log
WORKER_METRICS=${ORDERFLOW_WORKER_METRICS_ADDR:-127.0.0.1:9090}
BRIDGE_METRICS=${ORDERFLOW_BRIDGE_METRICS_ADDR:-127.0.0.1:9091}

say() { printf 'demo: %s\n' "$*"; }
fail() {
	echo "demo: FAILED $*" >&2
	exit 1
}

. "$ROOT/scripts/proc.sh"

stop_all() {
	stop_pid bridge "$BRIDGE_PID" "$BIN/starter" 60
	stop_pid worker "$WORKER_PID" "$BIN/worker" 60
}

status() {
	local rc=0
	if pid_alive "$WORKER_PID" "$BIN/worker"; then say "worker running, pid $(cat "$WORKER_PID"), log $WORKER_LOG"; else say "worker stopped" && rc=1; fi
	if pid_alive "$BRIDGE_PID" "$BIN/starter"; then say "bridge running, pid $(cat "$BRIDGE_PID"), log $BRIDGE_LOG"; else say "bridge stopped" && rc=1; fi
	return "$rc"
}

# http_ok URL: the URL answers 200.
http_ok() {
	local hostport=${1#http://} path
	path=/${hostport#*/}
	hostport=${hostport%%/*}
	if command -v curl >/dev/null 2>&1; then
		curl -fs -o /dev/null --max-time 2 "$1"
	else
		timeout 3 bash -c "exec 3<>/dev/tcp/${hostport%:*}/${hostport##*:}; printf 'GET $path HTTP/1.0\r\nHost: x\r\n\r\n' >&3; head -n1 <&3 | grep -q ' 200 '"
	fi
}

# start_one NAME PIDFILE LOG READY_URL COMMAND...: start COMMAND detached
# and wait until READY_URL answers. A process that exits during start-up (a
# service restarting at that moment) is started again, three times at most.
start_one() {
	local name=$1 pidfile=$2 log=$3 url=$4 try i
	shift 4
	for try in 1 2 3; do
		echo "=== $(date -u +%FT%TZ) starting $name" >>"$log"
		setsid "$@" >>"$log" 2>&1 </dev/null &
		echo $! >"$pidfile"
		for i in $(seq 1 120); do
			if http_ok "$url"; then
				say "$name ready ($url), log $log"
				return 0
			fi
			pid_alive "$pidfile" "$1" || break
			sleep 0.5
		done
		if pid_alive "$pidfile" "$1"; then
			fail "$name not ready within 60s ($url); see $log"
		fi
		say "$name exited during start-up (attempt $try): $(tail -n 1 "$log" | cut -c1-200)"
		sleep 3
	done
	fail "$name exited during start-up three times; see $log"
}

demo() {
	mkdir -p "$BIN" "$LOGS"
	cd "$ROOT"
	say "building worker, starter and orderflow into $BIN"
	go build -o "$BIN/worker" ./worker
	go build -o "$BIN/starter" ./starter
	go build -o "$BIN/orderflow" ./cmd/orderflow

	# Restart whatever runs, so the demo runs the code just built.
	stop_all
	# The worker and the bridge only check the schema: migrate it first.
	say "migrating the database"
	"$BIN/orderflow" migrate
	ORDERFLOW_WORKER_METRICS_ADDR=$WORKER_METRICS \
		start_one worker "$WORKER_PID" "$WORKER_LOG" "http://$WORKER_METRICS/readyz" "$BIN/worker"
	ORDERFLOW_BRIDGE_METRICS_ADDR=$BRIDGE_METRICS \
		start_one bridge "$BRIDGE_PID" "$BRIDGE_LOG" "http://$BRIDGE_METRICS/readyz" "$BIN/starter"

	local prefix expected example why rc=0
	prefix="demo-$(date -u +%Y%m%dT%H%M%S)-$RANDOM"
	expected=$DEMO/expected-$prefix.json
	say "publishing $ORDERS orders as run $prefix"
	"$BIN/orderflow" publish -orders "$ORDERS" -prefix "$prefix" -rate "$RATE" \
		-dup-rate 0.15 -reorder 0.3 -cancel-rate 0.2 -open-rate 0.1 -gap-rate 0.05 \
		-user-change-rate 0.3 -conflicts 5 -bad 6 \
		-illegal 5 -late-conflicts 3 -late-rate 0.1 -out "$expected"
	say "checking the invariants (waiting up to $WAIT for the run to settle)"
	"$BIN/orderflow" check -expected "$expected" -wait "$WAIT" | tee "$DEMO/check-$prefix.txt" || rc=$?
	if [ "$rc" -eq 0 ]; then
		# Once the run has settled: events that must change nothing
		# (illegal transitions, conflicting copies, late arrivals).
		say "publishing the late phase of run $prefix"
		"$BIN/orderflow" publish -late "$expected" -rate "$RATE"
		say "checking the invariants again (waiting up to $WAIT)"
		"$BIN/orderflow" check -expected "$expected" -wait "$WAIT" | tee "$DEMO/check-$prefix.txt" || rc=$?
	fi
	if [ "$rc" -eq 0 ]; then
		# The events the run lost are holes in its producer's sequence,
		# open since the first phase: past a short window, suspected
		# losses, which must be exactly the ones the generator dropped.
		say "listing the holes in the run's sequence (orderflow gaps, report in $DEMO/gaps-$prefix.txt)"
		"$BIN/orderflow" gaps -expected "$expected" -gap-window 1s -wait 1m >"$DEMO/gaps-$prefix.txt" || rc=$?
		grep -E '^(suspected lost|no suspected loss):' "$DEMO/gaps-$prefix.txt" || true
	fi
	example=$(sed -n 's/^example order: \([^ ]*\) (\(.*\))$/\1/p' "$DEMO/check-$prefix.txt")
	why=$(sed -n 's/^example order: \([^ ]*\) (\(.*\))$/\2/p' "$DEMO/check-$prefix.txt")

	echo
	say "Temporal UI:      $UI/namespaces/$NAMESPACE/workflows"
	say "an example order: $UI/namespaces/$NAMESPACE/workflows/order:${example:-$prefix-00000}${why:+  ($why)}"
	say "orders by status: $UI/namespaces/$NAMESPACE/workflows?query=OrderStatus%3D%22COMPLETED%22"
	say "the worker and the bridge keep running (logs in $LOGS); stop everything with: make down"
	if [ "$rc" -ne 0 ]; then
		fail "an invariant did not hold (exit $rc); expected state in $expected"
	fi
}

case ${1:-demo} in
demo) demo ;;
stop) stop_all ;;
status) status ;;
*)
	echo "usage: $0 [demo|stop|status]" >&2
	exit 2
	;;
esac
