# shellcheck shell=bash
# temporal.sh — Temporal. Profile dev, the default: `temporal server
# start-dev` of the Temporal CLI, one process with the Web UI, keeping a SQLite
# file in <data>/temporal, with namespace default and the search attribute
# OrderStatus. Profile server (ORDERFLOW_TEMPORAL_PROFILE=server):
# temporal-server.sh; each keeps its files apart (switch after a make down).

TEMPORAL_PORT=${ORDERFLOW_TEMPORAL_PORT:-7233}
TEMPORAL_UI_PORT=${ORDERFLOW_TEMPORAL_UI_PORT:-8233}
# ORDERFLOW_TEMPORAL_METRICS_PORT, when set, serves the dev server's
# Prometheus metrics (/metrics) on that port; none by default.
TEMPORAL_METRICS_PORT=${ORDERFLOW_TEMPORAL_METRICS_PORT:-}
TEMPORAL_PROFILE=${ORDERFLOW_TEMPORAL_PROFILE:-dev}
TEMPORAL_VERSION=1.5.1
TEMPORAL_BIN=$CACHE/temporal-$TEMPORAL_VERSION/temporal
TEMPORAL_PID=$DATA/temporal/temporal.pid
TEMPORAL_LOG=$LOGS/temporal.log
# temporal_cli ARGS...: the CLI on this stack's frontend.
temporal_cli() { "$TEMPORAL_BIN" "$@" --address "127.0.0.1:$TEMPORAL_PORT" --command-timeout 5s; }
# temporal_cli_build: the CLI, which the server profile uses too.
temporal_cli_build() {
	into_cache temporal "${TEMPORAL_BIN%/*}" "the Temporal CLI v$TEMPORAL_VERSION, built from the Go module proxy (minutes)" \
		go_binaries "github.com/temporalio/cli/cmd/temporal@v$TEMPORAL_VERSION=temporal"
}

temporal_running() { pid_alive "$TEMPORAL_PID" start-dev; }
# temporal_healthy: the frontend serves, with the search attribute, and the
# UI listens.
temporal_healthy() {
	temporal_cli operator cluster health 2>/dev/null | grep -q SERVING &&
		temporal_cli operator search-attribute list --namespace default 2>/dev/null | grep -q OrderStatus &&
		port_open "$TEMPORAL_UI_PORT"
}
# temporal_external: another clone's Temporal serves the port.
temporal_external() { ! pid_alive "$DATA/temporal-server/temporal-server.pid" "temporal-server --root" && port_open "$TEMPORAL_PORT" && temporal_healthy; }

temporal_start() {
	require_free_port temporal "$TEMPORAL_PORT" "$TEMPORAL_UI_PORT"
	say temporal "starting on 127.0.0.1:$TEMPORAL_PORT, UI on 127.0.0.1:$TEMPORAL_UI_PORT"
	spawn "$TEMPORAL_PID" "$TEMPORAL_LOG" "$TEMPORAL_BIN" server start-dev --ip 127.0.0.1 --port "$TEMPORAL_PORT" --ui-port "$TEMPORAL_UI_PORT" \
		--namespace default --db-filename "$DATA/temporal/temporal.db" --sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=NORMAL \
		--search-attribute OrderStatus=Keyword --log-level warn --color never \
		${TEMPORAL_METRICS_PORT:+--metrics-port "$TEMPORAL_METRICS_PORT"}
}

temporal_up() {
	temporal_cli_build
	mkdir -p "$DATA/temporal"
	up_service temporal "$TEMPORAL_LOG" "127.0.0.1:$TEMPORAL_PORT, UI :$TEMPORAL_UI_PORT" temporal
	temporal_running || return 0
	say temporal "healthy: 127.0.0.1:$TEMPORAL_PORT, UI http://127.0.0.1:$TEMPORAL_UI_PORT"
}
temporal_down() { stop_pid temporal "$TEMPORAL_PID" start-dev; }
temporal_status() { show temporal "$TEMPORAL_PID" start-dev "$TEMPORAL_PORT" "$TEMPORAL_LOG" "127.0.0.1:$TEMPORAL_PORT  UI http://127.0.0.1:$TEMPORAL_UI_PORT"; }

if [ "$TEMPORAL_PROFILE" = server ]; then
	. "$ROOT/scripts/stack/temporal-server.sh"
elif [ "$TEMPORAL_PROFILE" != dev ]; then
	usage_error "unknown Temporal profile '$TEMPORAL_PROFILE' (known: dev, server)"
fi
