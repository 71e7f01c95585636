# shellcheck shell=bash
# temporal-server.sh — the Temporal server profile (ORDERFLOW_TEMPORAL_PROFILE=server,
# make up TEMPORAL=server; the benchmark starts one beside the stack): the
# Temporal server built from the Go module proxy (go.temporal.io/server:
# cmd/server, and cmd/tools/sql, the schema tool with the schemas it embeds)
# on a PostgreSQL instance of its own, apart from orderflow's: a cluster of
# the binaries postgres.sh installs in <data>/temporal-server/postgres, on
# 127.0.0.1:ORDERFLOW_TEMPORAL_PG_PORT (default the Temporal port + 10),
# started and stopped with the server. In it, two databases owned by the
# role temporal (password temporal): ORDERFLOW_TEMPORAL_DB (default
# temporal) and the same name with _visibility. Frontend, history, matching
# and worker run in one process; from the Temporal port P
# (ORDERFLOW_TEMPORAL_PORT) it takes
#   P        frontend gRPC, the address clients use
#   P+1..3   history, matching and worker gRPC
#   P+4..7   membership of frontend, history, matching and worker
#   P+8      frontend HTTP API
#   P+9      the server's Prometheus metrics (/metrics)
#   P+10     its PostgreSQL, unless ORDERFLOW_TEMPORAL_PG_PORT says otherwise
# and the Web UI server (github.com/temporalio/ui-server, the version the CLI
# embeds) listens on ORDERFLOW_TEMPORAL_UI_PORT. Sourced by temporal.sh,
# whose temporal_up, temporal_down and temporal_status it replaces.
#
# ORDERFLOW_TEMPORAL_SHARDS (default 4) is the number of history shards. It
# is fixed when the databases are first used (the server would silently keep
# the first number), so it is written into the database's comment and
# another number is refused; other databases (ORDERFLOW_TEMPORAL_DB) take
# another. The dynamic configuration is deploy/temporal/dynamicconfig.yaml
# (ORDERFLOW_TEMPORAL_DYNAMIC_CONFIG), read again every 10 seconds.
#
# One server profile runs per data folder, and it can run beside a dev
# server (of the same data folder or another) on other ports, for example
#   ORDERFLOW_TEMPORAL_PROFILE=server ORDERFLOW_TEMPORAL_PORT=7333 \
#   ORDERFLOW_TEMPORAL_UI_PORT=8333 scripts/stack.sh up temporal
# (and the same variables with down and status); clients then use
# TEMPORAL_ADDRESS=127.0.0.1:7333, and its PostgreSQL is on 7343.

TSERVER_VERSION=1.29.2
TSERVER_HOME=$CACHE/temporal-server-$TSERVER_VERSION
TUI_VERSION=2.42.1
TUI_BIN=$CACHE/temporal-ui-server-$TUI_VERSION/temporal-ui-server

TSERVER_SHARDS=${ORDERFLOW_TEMPORAL_SHARDS:-4}
TSERVER_DB=${ORDERFLOW_TEMPORAL_DB:-temporal}
TSERVER_VIS_DB=${TSERVER_DB}_visibility
TSERVER_DYNAMIC_CONFIG=${ORDERFLOW_TEMPORAL_DYNAMIC_CONFIG:-$ROOT/deploy/temporal/dynamicconfig.yaml}
# Retention of closed workflows in namespace default.
TSERVER_RETENTION=24h

TSERVER_DIR=$DATA/temporal-server
TSERVER_PID=$TSERVER_DIR/temporal-server.pid
TSERVER_LOG=$LOGS/temporal-server.log
TSERVER_SCHEMA_LOG=$LOGS/temporal-server-schema.log
TUI_DIR=$DATA/temporal-ui
TUI_PID=$TUI_DIR/temporal-ui.pid
TUI_LOG=$LOGS/temporal-ui.log

# The server's PostgreSQL: like the stack's (postgres.sh), kept in
# /var/lib/orderflow when user postgres cannot reach the data folder.
TPG_PORT=${ORDERFLOW_TEMPORAL_PG_PORT:-$((TEMPORAL_PORT + 10))}
TPG_DATA=$TSERVER_DIR/postgres
TPG_LOG=$LOGS/temporal-postgres.log
TPG_SOCK=$DATA/run/temporal-postgres
if [ -n "${PG_BASE:-}" ]; then
	TPG_DATA=$PG_BASE/temporal-postgres TPG_LOG=$PG_BASE/temporal-postgres.log TPG_SOCK=$PG_BASE/temporal-run
fi
if [ "${#TPG_SOCK}" -gt 90 ]; then TPG_SOCK=/tmp/orderflow-tpg-$(id -u)-$TPG_PORT; fi # a socket's path is short

# tserver_port N: the server's port P+N (see the table above).
tserver_port() { echo $((TEMPORAL_PORT + $1)); }

# tpg_psql DATABASE ARGS...: psql as the instance's superuser over its
# socket, with the databases' names as variables.
tpg_psql() {
	as_pg "$PG_BIN/psql" -X -q -h "$TPG_SOCK" -p "$TPG_PORT" -U postgres -d "$1" -v ON_ERROR_STOP=1 \
		-v db="$TSERVER_DB" -v visdb="$TSERVER_VIS_DB" "${@:2}"
}
tpg_running() { [ -n "$PG_BIN" ] && [ -f "$TPG_DATA/PG_VERSION" ] && as_pg "$PG_BIN/pg_ctl" -D "$TPG_DATA" status >/dev/null 2>&1; }
tpg_healthy() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$TPG_PORT"; }
# tpg_running_port: the port it was started with, from its settings.
tpg_running_port() { sed -n 's/^port = \([0-9]*\)$/\1/p' "$TPG_DATA/orderflow.conf" 2>/dev/null; }

# tpg_start: the cluster, initialised when missing, with the stack's
# settings (deploy/postgres/local.conf) but TLS, on its own port and socket.
tpg_start() {
	if [ ! -f "$TPG_DATA/PG_VERSION" ]; then
		say temporal-postgres "initialising cluster in $TPG_DATA"
		as_pg "$PG_BIN/initdb" -D "$TPG_DATA" -U postgres -E UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 >>"$TPG_LOG" 2>&1 ||
			fail temporal-postgres "initdb failed: $(last_error "$TPG_LOG")" "$TPG_LOG"
		echo "include_if_exists = 'orderflow.conf'" >>"$TPG_DATA/postgresql.conf"
	fi
	require_free_port temporal-postgres "$TPG_PORT"
	{
		echo "# Written by scripts/stack/temporal-server.sh from deploy/postgres/local.conf at every start."
		cat "$ROOT/deploy/postgres/local.conf"
		printf "%s\n" "ssl = off" "port = $TPG_PORT" "unix_socket_directories = '$TPG_SOCK'"
	} >"$TPG_DATA/orderflow.conf"
	if is_root; then chown postgres: "$TPG_DATA/orderflow.conf"; fi
	say temporal-postgres "starting on 127.0.0.1:$TPG_PORT"
	as_pg "$PG_BIN/pg_ctl" -D "$TPG_DATA" -l "$TPG_LOG" -w -t "$HEALTH_TIMEOUT" start >/dev/null 2>&1 ||
		fail temporal-postgres "did not start within ${HEALTH_TIMEOUT}s: $(last_error "$TPG_LOG")" "$TPG_LOG"
}

# tpg_up: the server's PostgreSQL, started unless it runs.
tpg_up() {
	if [ -z "$PG_BIN" ]; then apt_install postgres postgresql && PG_BIN=$(pg_bindir); fi
	[ -n "$PG_BIN" ] || fail temporal-postgres "PostgreSQL binaries still missing after install" "$LOGS/postgres-install.log"
	if is_root && ! id postgres >/dev/null 2>&1; then fail temporal-postgres "user postgres is missing; reinstall Debian's postgresql-common"; fi
	[ "$TPG_PORT" != "$PG_PORT" ] || fail temporal-postgres "ORDERFLOW_TEMPORAL_PG_PORT is the stack's PostgreSQL port $PG_PORT; give the server's PostgreSQL another"
	mkdir -p "$TPG_DATA" "$TPG_SOCK"
	touch "$TPG_LOG"
	if is_root; then chown postgres: "$TPG_DATA" "$TPG_SOCK" "$TPG_LOG"; fi
	chmod 700 "$TPG_DATA" "$TPG_SOCK"
	if [ -n "${PG_BASE:-}" ]; then
		[ -L "$TSERVER_DIR/postgres" ] || [ ! -e "$TSERVER_DIR/postgres" ] || fail temporal-postgres "$TSERVER_DIR/postgres exists but user postgres cannot reach $DATA; make its parent directories world-executable (chmod o+x) or move the clone"
		ln -sfn "$TPG_DATA" "$TSERVER_DIR/postgres"
		ln -sfn "$TPG_LOG" "$LOGS/temporal-postgres.log"
	fi
	if tpg_running && [ "$(tpg_running_port)" != "$TPG_PORT" ]; then
		fail temporal-postgres "this data folder's server profile has its PostgreSQL on 127.0.0.1:$(tpg_running_port), not $TPG_PORT; stop it first (scripts/stack.sh down temporal with its ports), or use another ORDERFLOW_DATA"
	fi
	up_service temporal-postgres "$TPG_LOG" "127.0.0.1:$TPG_PORT" tpg
}
tpg_down() {
	tpg_running && { as_pg "$PG_BIN/pg_ctl" -D "$TPG_DATA" -m fast -w -t 60 stop >/dev/null 2>&1 || fail temporal-postgres "pg_ctl stop failed" "$TPG_LOG"; }
	say temporal-postgres "stopped"
}

tserver_build() {
	into_cache temporal "$TSERVER_HOME" "Temporal server v$TSERVER_VERSION and temporal-sql-tool, built from the Go module proxy (about 10 minutes)" \
		go_binaries "go.temporal.io/server/cmd/server@v$TSERVER_VERSION=temporal-server" "go.temporal.io/server/cmd/tools/sql@v$TSERVER_VERSION=temporal-sql-tool"
	into_cache temporal "${TUI_BIN%/*}" "the Temporal UI server v$TUI_VERSION, built from the Go module proxy (minutes)" \
		go_binaries "github.com/temporalio/ui-server/v2/cmd/server@v$TUI_VERSION=temporal-ui-server"
}

tserver_running() { pid_alive "$TSERVER_PID" "temporal-server --root"; }
tui_running() { pid_alive "$TUI_PID" "temporal-ui-server --root"; }
# The ports this data folder's server and UI were started with, from their
# configuration files.
tserver_running_port() { sed -n 's/^      rpcAddress: 127.0.0.1:\([0-9]*\)$/\1/p' "$TSERVER_DIR/config/orderflow.yaml" 2>/dev/null; }
tui_running_port() { sed -n 's/^port: \([0-9]*\)$/\1/p' "$TUI_DIR/config/orderflow.yaml" 2>/dev/null; }

# tserver_healthy: the frontend answers health checks; tui_healthy: the
# whole profile is healthy.
tserver_healthy() { temporal_cli operator cluster health 2>/dev/null | grep -q SERVING; }
tui_healthy() { temporal_healthy; }

# tserver_db: role temporal and the two databases in the server's
# PostgreSQL, created when missing; the main one is stamped with the number
# of history shards when it is created, and a different number is refused.
tserver_db() {
	local comment shards
	echo "=== $(date -u +%FT%TZ) databases $TSERVER_DB and $TSERVER_VIS_DB" >>"$TSERVER_SCHEMA_LOG"
	tpg_psql postgres >>"$TSERVER_SCHEMA_LOG" 2>&1 <<EOF || fail temporal "could not create role temporal and databases $TSERVER_DB and $TSERVER_VIS_DB on 127.0.0.1:$TPG_PORT" "$TSERVER_SCHEMA_LOG"
SELECT 'CREATE ROLE temporal LOGIN PASSWORD ''temporal'''
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'temporal') \gexec
SELECT unnest(ARRAY[format('CREATE DATABASE %I OWNER temporal', :'db'),
	format('COMMENT ON DATABASE %I IS %L', :'db', 'orderflow Temporal server: $TSERVER_SHARDS history shards')])
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SELECT format('CREATE DATABASE %I OWNER temporal', :'visdb')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'visdb') \gexec
EOF
	comment=$(tpg_psql postgres -tA <<<"SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = :'db'" 2>>"$TSERVER_SCHEMA_LOG") || true
	shards=$(sed -n 's/^orderflow Temporal server: \([0-9]*\) history shards$/\1/p' <<<"$comment")
	if [ -n "$shards" ] && [ "$shards" != "$TSERVER_SHARDS" ]; then
		fail temporal "database $TSERVER_DB was set up with $shards history shards, fixed for its lifetime; set ORDERFLOW_TEMPORAL_SHARDS=$shards, or ORDERFLOW_TEMPORAL_DB=${TSERVER_DB}_$TSERVER_SHARDS for new databases with $TSERVER_SHARDS"
	fi
}

# tserver_db_unused: no session on the two databases; a second server on
# them would fight this one over the shards.
tserver_db_unused() {
	local n
	n=$(tpg_psql postgres -tA <<<"SELECT count(*) FROM pg_stat_activity WHERE datname IN (:'db', :'visdb')" 2>>"$TSERVER_SCHEMA_LOG") || return 1
	[ "$n" = 0 ]
}

# tserver_sql_tool DATABASE ARGS...: temporal-sql-tool on DATABASE as role temporal.
tserver_sql_tool() {
	SQL_PASSWORD=temporal "$TSERVER_HOME/temporal-sql-tool" --plugin postgres12_pgx --endpoint 127.0.0.1 --port "$TPG_PORT" \
		--user temporal --database "$1" "${@:2}" >>"$TSERVER_SCHEMA_LOG" 2>&1
}

# tserver_schema: set up and update the schemas of both databases from the
# copy embedded in temporal-sql-tool. setup-schema -v 0.0 creates the
# version tables once; update-schema applies the versions not applied yet.
tserver_schema() {
	local db schema
	for db in "$TSERVER_DB" "$TSERVER_VIS_DB"; do
		schema=postgresql/v12/temporal
		if [ "$db" = "$TSERVER_VIS_DB" ]; then schema=postgresql/v12/visibility; fi
		echo "=== $(date -u +%FT%TZ) schema $schema in database $db" >>"$TSERVER_SCHEMA_LOG"
		if ! tserver_sql_tool "$db" setup-schema -v 0.0 || ! tserver_sql_tool "$db" update-schema --schema-name "$schema"; then
			fail temporal "temporal-sql-tool could not set up the schema of database $db: $(last_error "$TSERVER_SCHEMA_LOG")" "$TSERVER_SCHEMA_LOG"
		fi
	done
}

# tserver_forget_members: delete the membership rows that earlier server
# processes left in the database (none runs now: see tserver_db_unused). A
# new server would first try to join them, which takes over 30 seconds when
# their ports changed or are taken by another program.
tserver_forget_members() {
	PGPASSWORD=temporal PGCONNECT_TIMEOUT=5 "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$TPG_PORT" -U temporal -d "$TSERVER_DB" \
		-v ON_ERROR_STOP=1 -c 'DELETE FROM cluster_membership' >>"$TSERVER_SCHEMA_LOG" 2>&1 ||
		fail temporal "could not clear table cluster_membership of database $TSERVER_DB" "$TSERVER_SCHEMA_LOG"
}

# tserver_write_conf: the server's configuration, config/orderflow.yaml in
# its folder (the server reads <root>/<config>/<env>.yaml).
tserver_write_conf() {
	mkdir -p "$TSERVER_DIR/config"
	cat >"$TSERVER_DIR/config/orderflow.yaml" <<EOF
# Written by scripts/stack/temporal-server.sh on every start; edit the script, not this file.
log:
  stdout: true
  level: warn

persistence:
  defaultStore: default
  visibilityStore: visibility
  numHistoryShards: $TSERVER_SHARDS
  datastores:
    default:
      sql:
        pluginName: postgres12_pgx
        databaseName: $TSERVER_DB
        connectAddr: 127.0.0.1:$TPG_PORT
        connectProtocol: tcp
        user: temporal
        password: temporal
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
    visibility:
      sql:
        pluginName: postgres12_pgx
        databaseName: $TSERVER_VIS_DB
        connectAddr: 127.0.0.1:$TPG_PORT
        connectProtocol: tcp
        user: temporal
        password: temporal
        maxConns: 10
        maxIdleConns: 10
        maxConnLifetime: 1h

global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
  metrics:
    prometheus:
      framework: tally
      timerType: histogram
      listenAddress: 127.0.0.1:$(tserver_port 9)

services:
  frontend:
    rpc:
      grpcPort: $TEMPORAL_PORT
      membershipPort: $(tserver_port 4)
      httpPort: $(tserver_port 8)
      bindOnLocalHost: true
  history:
    rpc:
      grpcPort: $(tserver_port 1)
      membershipPort: $(tserver_port 5)
      bindOnLocalHost: true
  matching:
    rpc:
      grpcPort: $(tserver_port 2)
      membershipPort: $(tserver_port 6)
      bindOnLocalHost: true
  worker:
    rpc:
      grpcPort: $(tserver_port 3)
      membershipPort: $(tserver_port 7)
      bindOnLocalHost: true

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: 127.0.0.1:$TEMPORAL_PORT
      httpAddress: 127.0.0.1:$(tserver_port 8)

dcRedirectionPolicy:
  policy: noop

dynamicConfigClient:
  filepath: $TSERVER_DYNAMIC_CONFIG
  pollInterval: 10s
EOF
}

# tui_write_conf: the UI server's configuration (<root>/config/orderflow.yaml).
tui_write_conf() {
	mkdir -p "$TUI_DIR/config"
	cat >"$TUI_DIR/config/orderflow.yaml" <<EOF
# Written by scripts/stack/temporal-server.sh on every start; edit the script, not this file.
temporalGrpcAddress: 127.0.0.1:$TEMPORAL_PORT
host: 127.0.0.1
port: $TEMPORAL_UI_PORT
enableUi: true
defaultNamespace: default
notifyOnNewVersion: false
EOF
}

# tserver_namespace_ready: namespace default exists with search attribute
# OrderStatus; registers what is missing with the CLI and answers false, so
# that wait_until asks again (a namespace just registered reaches the
# frontend's cache within seconds).
tserver_namespace_ready() {
	if ! temporal_cli operator namespace describe --namespace default >/dev/null 2>&1; then
		temporal_cli operator namespace create --namespace default --retention "$TSERVER_RETENTION" >>"$TSERVER_LOG" 2>&1
		return 1
	fi
	temporal_cli operator search-attribute list --namespace default 2>/dev/null | grep -q OrderStatus && return 0
	temporal_cli operator search-attribute create --namespace default --name OrderStatus --type Keyword >>"$TSERVER_LOG" 2>&1
	return 1
}

# tserver_start: databases, schemas and configuration, then the server
# (its PostgreSQL runs: tpg_up).
tserver_start() {
	local p
	if pid_alive "$TEMPORAL_PID" "start-dev.* --port $TEMPORAL_PORT "; then
		fail temporal "the dev profile runs on 127.0.0.1:$TEMPORAL_PORT; stop it first (make down), or give the server profile other ports (ORDERFLOW_TEMPORAL_PORT, ORDERFLOW_TEMPORAL_UI_PORT)"
	fi
	for p in 0 1 2 3 4 5 6 7 8 9; do require_free_port temporal "$(tserver_port "$p")"; done
	[ -f "$TSERVER_DYNAMIC_CONFIG" ] || fail temporal "dynamic config file $TSERVER_DYNAMIC_CONFIG not found (ORDERFLOW_TEMPORAL_DYNAMIC_CONFIG)"
	tserver_db
	tserver_db_unused || fail temporal "databases $TSERVER_DB and $TSERVER_VIS_DB are in use, probably by another Temporal server; stop it, or give this one other databases with ORDERFLOW_TEMPORAL_DB"
	tserver_schema
	tserver_forget_members
	tserver_write_conf
	say temporal "starting Temporal server v$TSERVER_VERSION on 127.0.0.1:$TEMPORAL_PORT ($TSERVER_SHARDS history shards, databases $TSERVER_DB and $TSERVER_VIS_DB)"
	spawn "$TSERVER_PID" "$TSERVER_LOG" "$TSERVER_HOME/temporal-server" --root "$TSERVER_DIR" --config config --env orderflow --allow-no-auth start
}

temporal_up() {
	[[ $TSERVER_SHARDS =~ ^[1-9][0-9]*$ ]] || fail temporal "ORDERFLOW_TEMPORAL_SHARDS must be a positive number, not '$TSERVER_SHARDS'"
	# The CLI checks health and registers the namespace and search attribute.
	temporal_cli_build
	tserver_build
	mkdir -p "$TSERVER_DIR" "$TUI_DIR"
	if tserver_running && [ "$(tserver_running_port)" != "$TEMPORAL_PORT" ]; then
		fail temporal "this data folder's server profile runs on 127.0.0.1:$(tserver_running_port), not $TEMPORAL_PORT; stop it first (scripts/stack.sh down temporal with its ORDERFLOW_TEMPORAL_PORT), or use another ORDERFLOW_DATA"
	fi
	if tui_running && [ "$(tui_running_port)" != "$TEMPORAL_UI_PORT" ]; then
		fail temporal "this data folder's UI server runs on 127.0.0.1:$(tui_running_port), not $TEMPORAL_UI_PORT; stop it first (scripts/stack.sh down temporal with its ports), or use another ORDERFLOW_DATA"
	fi
	if ! tserver_running && ! tui_running && port_open "$TEMPORAL_PORT" && temporal_healthy; then
		external temporal "Temporal server on 127.0.0.1:$TEMPORAL_PORT with search attribute OrderStatus"
		return 0
	fi
	tpg_up
	up_service temporal "$TSERVER_LOG" "127.0.0.1:$TEMPORAL_PORT (server profile)" tserver
	wait_until "$HEALTH_TIMEOUT" tserver_namespace_ready ||
		fail temporal "namespace default with search attribute OrderStatus not registered within ${HEALTH_TIMEOUT}s: $(last_error "$TSERVER_LOG")" "$TSERVER_LOG"
	up_service temporal-ui "$TUI_LOG" "http://127.0.0.1:$TEMPORAL_UI_PORT" tui
	say temporal "healthy: 127.0.0.1:$TEMPORAL_PORT (server profile, $TSERVER_SHARDS history shards, PostgreSQL 127.0.0.1:$TPG_PORT), UI http://127.0.0.1:$TEMPORAL_UI_PORT, metrics http://127.0.0.1:$(tserver_port 9)/metrics"
}

tui_start() {
	require_free_port temporal-ui "$TEMPORAL_UI_PORT"
	tui_write_conf
	say temporal-ui "starting the UI server v$TUI_VERSION on 127.0.0.1:$TEMPORAL_UI_PORT"
	spawn "$TUI_PID" "$TUI_LOG" "$TUI_BIN" --root "$TUI_DIR" --config config --env orderflow start
}

temporal_down() {
	stop_pid temporal-ui "$TUI_PID" "temporal-ui-server --root"
	stop_pid temporal "$TSERVER_PID" "temporal-server --root" 60
	tpg_down
}

temporal_status() {
	local rc=0
	show temporal "$TSERVER_PID" "temporal-server --root" "$TEMPORAL_PORT" "$TSERVER_LOG" \
		"127.0.0.1:$(tserver_running_port)  server profile, $(sed -n 's/^  numHistoryShards: //p' "$TSERVER_DIR/config/orderflow.yaml" 2>/dev/null) history shards" || rc=1
	show temporal-ui "$TUI_PID" "temporal-ui-server --root" "$TEMPORAL_UI_PORT" "$TUI_LOG" "http://127.0.0.1:$(tui_running_port)" || rc=1
	if tpg_running; then
		say temporal-postgres "running  127.0.0.1:$(tpg_running_port)  data $TPG_DATA  log $TPG_LOG"
	else
		say temporal-postgres "stopped  data $TPG_DATA  log $TPG_LOG$(port_note "$TPG_PORT")" && rc=1
	fi
	return "$rc"
}
