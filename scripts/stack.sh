#!/usr/bin/env bash
# stack.sh — the local orderflow stack without Docker: PostgreSQL, the
# Temporal dev server (with its Web UI), an Apache RocketMQ name server and
# broker, the RocketMQ proxy (for RocketMQ 5 gRPC clients), and Redis (the
# bridges' shared duplicate filter).
#
#   scripts/stack.sh up     [service...]   start what is not running, wait for health
#   scripts/stack.sh down   [service...]   stop, keeping data
#   scripts/stack.sh status [service...]   print each service's state
#   scripts/stack.sh deps                  install missing prerequisites (root, apt-get)
#
# Services: postgres, temporal, rocketmq, proxy, redis (default: all). An
# `up` of all of them also fetches the interop tests' Java clients into the
# cache.
#
# Data and logs live under ORDERFLOW_DATA (default: <repo>/.data, git-ignored).
# Downloaded and built tools live under ORDERFLOW_CACHE (default:
# ~/.cache/orderflow), shared by every clone. ORDERFLOW_HEALTH_TIMEOUT
# (seconds, default 120) bounds each health wait.
#
# A second stack can run beside the first (the fault tests of `make chaos`
# run one, so that killing its services disturbs nobody): give it its own
# ORDERFLOW_DATA and ports with ORDERFLOW_PG_PORT (5432),
# ORDERFLOW_TEMPORAL_PORT (7233), ORDERFLOW_TEMPORAL_UI_PORT (8233),
# ORDERFLOW_NAMESRV_PORT (9876), ORDERFLOW_BROKER_PORT (10911; the broker
# also takes the port two below it and the one above),
# ORDERFLOW_PROXY_PORT (8081) and ORDERFLOW_PROXY_REMOTING_PORT (8080), and
# ORDERFLOW_REDIS_PORT (6379). ORDERFLOW_BROKER_IP (default
# 127.0.0.1) is the address the broker announces to clients through the name
# server while it listens on 127.0.0.1: another loopback address such as
# 127.0.0.2 lets a TCP proxy listening there stand between the clients and
# the broker, to cut the broker off the network.
#
# ORDERFLOW_REDIS_MAXMEMORY (default 256mb) bounds Redis's memory: past it
# Redis evicts the least recently used keys, which only costs the bridges a
# signal each.
#
# PostgreSQL takes TLS and plain connections alike. Its self-signed
# certificate (for 127.0.0.1 and localhost) is made once, in its data
# directory, and copied to <data>/postgres-tls/root.crt for clients to trust
# (sslmode=verify-full&sslrootcert=...).
#
# A service whose port is already served by a working instance started
# elsewhere (another clone's stack) is used as it is, and left alone by down.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DATA=${ORDERFLOW_DATA:-$ROOT/.data}
CACHE=${ORDERFLOW_CACHE:-$HOME/.cache/orderflow}
LOGS=$DATA/logs
HEALTH_TIMEOUT=${ORDERFLOW_HEALTH_TIMEOUT:-120}

PG_PORT=${ORDERFLOW_PG_PORT:-5432}
TEMPORAL_PORT=${ORDERFLOW_TEMPORAL_PORT:-7233}
TEMPORAL_UI_PORT=${ORDERFLOW_TEMPORAL_UI_PORT:-8233}
NAMESRV_PORT=${ORDERFLOW_NAMESRV_PORT:-9876}
BROKER_PORT=${ORDERFLOW_BROKER_PORT:-10911}
BROKER_IP=${ORDERFLOW_BROKER_IP:-127.0.0.1}
REDIS_PORT=${ORDERFLOW_REDIS_PORT:-6379}
REDIS_MAXMEMORY=${ORDERFLOW_REDIS_MAXMEMORY:-256mb}

TEMPORAL_VERSION=1.5.1
ORDER_TOPIC=ORDER_EVENTS
ORDER_TOPIC_QUEUES=8

# ---------------------------------------------------------------- helpers

say() { printf '%-9s %s\n' "$1:" "$2"; }

# fail SERVICE MESSAGE [LOG]: one clear line naming the service, the reason
# and, when there is one, the log to read; then exit.
fail() {
	local msg="$1: $2"
	if [ -n "${3:-}" ]; then msg="$msg (log: $3)"; fi
	echo "stack: FAILED $msg" >&2
	exit 1
}

# last_error LOG: the last line of LOG that looks like an error, shortened.
last_error() {
	local line
	line=$(tail -n 200 "$1" 2>/dev/null | grep -E -i 'error|exception|fatal|panic|already in use|denied' | tail -n 1 | cut -c1-240 || true)
	echo "${line:-see the log}"
}

is_root() { [ "$(id -u)" -eq 0 ]; }

# port_open PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_open() { timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# port_owner PORT: a short description of the process listening on PORT.
port_owner() {
	local out=""
	if command -v ss >/dev/null 2>&1; then
		out=$(ss -ltnpH "sport = :$1" 2>/dev/null | sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\).*/\1 (pid \2)/p' | head -n1 || true)
	fi
	echo "${out:-an unknown process}"
}

# port_note PORT: for status lines, who holds PORT when the service is not
# running here.
port_note() {
	if port_open "$1"; then echo "  (port $1 held by $(port_owner "$1"))"; fi
}

# require_free_port SERVICE PORT: fail when another program holds PORT.
require_free_port() {
	if port_open "$2"; then
		fail "$1" "port $2 is already taken by another program: $(port_owner "$2"); stop it or free the port, then run make up again"
	fi
}

. "$ROOT/scripts/proc.sh"

# external SERVICE WHAT: the service's port is held by a working instance
# that this clone did not start (typically another clone's stack); use it.
external() { say "$1" "using the already running $2 (not started from this clone; make down here leaves it alone)"; }

# wait_until SECONDS COMMAND...: poll COMMAND every half second.
wait_until() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.5
	done
}

# spawn PIDFILE LOG COMMAND...: start COMMAND detached from this shell and
# its terminal, appending its output to LOG.
spawn() {
	local pidfile=$1 log=$2
	shift 2
	setsid "$@" >>"$log" 2>&1 </dev/null &
	echo $! >"$pidfile"
}

# ---------------------------------------------------------------- PostgreSQL

PG_DATA=$DATA/postgres
PG_LOG=$LOGS/postgres.log
PG_SOCK=$DATA/run/postgres
# The copy of the server's self-signed certificate that clients trust.
PG_TLS_ROOT=$DATA/postgres-tls/root.crt
# The cluster runs as user postgres when the script runs as root. When that
# user cannot reach the data folder (a clone under /root, say), the cluster's
# files live under /var/lib/orderflow/<hash of the data folder> instead, with
# symlinks from the data folder.
if [ "$(id -u)" -eq 0 ] && id postgres >/dev/null 2>&1; then
	mkdir -p "$DATA"
	if ! runuser -u postgres -- test -x "$DATA" 2>/dev/null; then
		PG_BASE=/var/lib/orderflow/$(printf '%s' "$DATA" | md5sum | cut -c1-12)
		PG_DATA=$PG_BASE/postgres
		PG_LOG=$PG_BASE/postgres.log
		PG_SOCK=$PG_BASE/run
	fi
fi

pg_bindir() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

# pg_socket_dir: the Unix socket directory, inside the data folder unless
# that path is too long for a socket name.
pg_socket_dir() {
	local d=$PG_SOCK
	if [ "${#d}" -gt 90 ]; then d=/tmp/orderflow-pg-$(id -u); fi
	echo "$d"
}

# as_pg COMMAND...: run as the cluster's owner (postgres when root).
as_pg() {
	if is_root; then runuser -u postgres -- "$@"; else "$@"; fi
}

# apt_install LOGNAME PACKAGE...: install Debian packages as root, without
# letting the postgresql package create and start its own cluster on 5432.
apt_install() {
	local log=$LOGS/$1-install.log
	shift
	mkdir -p /etc/postgresql-common/createcluster.d
	echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/orderflow.conf
	if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"; } >"$log" 2>&1; then
		fail install "apt-get install $* failed; check the network and apt sources, then try again" "$log"
	fi
	# Older packages ignore createcluster.d: stop any cluster they started on
	# the project's port.
	if command -v pg_lsclusters >/dev/null 2>&1; then
		pg_lsclusters -h 2>/dev/null | while read -r ver name port status _; do
			if [ "$port" = "$PG_PORT" ] && [ "$status" = online ]; then
				pg_ctlcluster "$ver" "$name" stop >>"$log" 2>&1 || true
			fi
		done
	fi
}

pg_install() {
	if ! is_root; then
		fail postgres "PostgreSQL binaries not found in /usr/lib/postgresql/*/bin; install them with: sudo apt-get install -y postgresql"
	fi
	command -v apt-get >/dev/null 2>&1 || fail postgres "PostgreSQL binaries not found and apt-get is missing; install PostgreSQL 15 or newer"
	say postgres "installing Debian's postgresql package"
	apt_install postgres postgresql
}

# deps: install what a fresh Debian machine lacks (as root): PostgreSQL, a
# Java 17 JDK (the runtime for RocketMQ, javac for the interop tests' Java
# programs), Maven, openssl, Redis. Go must already be present.
deps() {
	local pkgs=()
	command -v go >/dev/null 2>&1 || fail deps "go not found; install Go 1.26 from https://go.dev/dl/ and put it on PATH"
	pg_bindir >/dev/null || pkgs+=(postgresql)
	if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then pkgs+=(openjdk-17-jdk-headless); fi
	command -v mvn >/dev/null 2>&1 || pkgs+=(maven)
	command -v ss >/dev/null 2>&1 || pkgs+=(iproute2)
	command -v openssl >/dev/null 2>&1 || pkgs+=(openssl)
	redis_bin >/dev/null || pkgs+=(redis-server)
	if [ "${#pkgs[@]}" -eq 0 ]; then
		say deps "nothing to install"
		return 0
	fi
	is_root || fail deps "missing: ${pkgs[*]}; install them with: sudo apt-get install -y ${pkgs[*]}"
	command -v apt-get >/dev/null 2>&1 || fail deps "missing: ${pkgs[*]}, and apt-get is not available to install them"
	say deps "installing ${pkgs[*]}"
	apt_install deps ca-certificates "${pkgs[@]}"
	redis_package_service_off deps
	say deps "installed ${pkgs[*]}"
}

pg_running() {
	local bin
	bin=$(pg_bindir) || return 1
	[ -f "$PG_DATA/PG_VERSION" ] || return 1
	as_pg "$bin/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1
}

pg_ready() { "$(pg_bindir)/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"; }
pg_ready_or_gone() { ! pg_running || pg_ready; }

# pg_external_ok: whatever listens on the port is a PostgreSQL that takes
# the orderflow role's password for database orderflow.
pg_external_ok() {
	local bin
	bin=$(pg_bindir) || return 1
	[ "$(PGPASSWORD=orderflow PGCONNECT_TIMEOUT=3 "$bin/psql" -X -h 127.0.0.1 -p "$PG_PORT" -U orderflow -d orderflow -tAc 'SELECT 1' 2>/dev/null)" = 1 ]
}

pg_psql() {
	local bin
	bin=$(pg_bindir)
	as_pg "$bin/psql" -X -q -h "$(pg_socket_dir)" -p "$PG_PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"
}

# pg_tls_cert: the server's self-signed certificate and key in the data
# directory, made once (both again when either is missing).
pg_tls_cert() {
	local crt=$PG_DATA/server.crt key=$PG_DATA/server.key log=$LOGS/postgres-tls.log
	if [ ! -s "$crt" ] || [ ! -s "$key" ]; then
		if ! command -v openssl >/dev/null 2>&1; then
			if ! is_root || ! command -v apt-get >/dev/null 2>&1; then
				fail postgres "openssl not found (needed once, for the TLS certificate); install it with: sudo apt-get install -y openssl"
			fi
			say postgres "installing Debian's openssl package"
			apt_install postgres-openssl openssl
		fi
		say postgres "making a self-signed TLS certificate for 127.0.0.1 and localhost"
		rm -f "$crt.tmp" "$key.tmp"
		if ! (umask 077 && openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
			-subj "/CN=orderflow local PostgreSQL" \
			-addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
			-keyout "$key.tmp" -out "$crt.tmp") >"$log" 2>&1; then
			rm -f "$crt.tmp" "$key.tmp"
			fail postgres "openssl could not make the TLS certificate: $(last_error "$log")" "$log"
		fi
		chmod 600 "$key.tmp"
		chmod 644 "$crt.tmp"
		if is_root; then chown postgres: "$key.tmp" "$crt.tmp"; fi
		mv -f "$key.tmp" "$key"
		mv -f "$crt.tmp" "$crt"
	fi
}

# pg_tls_publish: the copy of the server's certificate that clients trust,
# outside the private data directory; rewritten only when it differs.
pg_tls_publish() {
	local crt=$PG_DATA/server.crt
	[ -s "$crt" ] || return 0
	mkdir -p "$(dirname "$PG_TLS_ROOT")"
	if ! cmp -s "$crt" "$PG_TLS_ROOT"; then
		cp "$crt" "$PG_TLS_ROOT.tmp"
		chmod 644 "$PG_TLS_ROOT.tmp"
		mv -f "$PG_TLS_ROOT.tmp" "$PG_TLS_ROOT"
	fi
}

# pg_tls_on: the running server was started with the TLS settings (the
# configuration file is written at each start only).
pg_tls_on() { grep -qx 'ssl = on' "$PG_DATA/orderflow.conf" 2>/dev/null; }

pg_write_conf() {
	cat >"$PG_DATA/orderflow.conf" <<EOF
# Written by scripts/stack.sh on every start; edit the script, not this file.
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$(pg_socket_dir)'
unix_socket_permissions = 0700
max_connections = 200
shared_buffers = 256MB
# Durability stays on: orderflow is about crash safety.
fsync = on
synchronous_commit = on
full_page_writes = on
max_wal_size = 1GB
checkpoint_timeout = 15min
log_line_prefix = '%m [%p] %q%u@%d '
log_min_messages = warning
# TLS on request (sslmode=require, verify-full); plain connections still work.
ssl = on
ssl_cert_file = '$PG_DATA/server.crt'
ssl_key_file = '$PG_DATA/server.key'
EOF
	if is_root; then chown postgres: "$PG_DATA/orderflow.conf"; fi
}

pg_up() {
	local bin sock
	bin=$(pg_bindir) || { pg_install; bin=$(pg_bindir) || fail postgres "PostgreSQL binaries still missing after install" "$LOGS/postgres-install.log"; }
	if is_root && ! id postgres >/dev/null 2>&1; then
		fail postgres "user 'postgres' is missing; reinstall Debian's postgresql package: apt-get install --reinstall postgresql-common"
	fi
	sock=$(pg_socket_dir)
	mkdir -p "$PG_DATA" "$sock"
	touch "$PG_LOG"
	if is_root; then chown postgres: "$PG_DATA" "$sock" "$PG_LOG"; fi
	chmod 700 "$PG_DATA" "$sock"
	if [ "$PG_DATA" != "$DATA/postgres" ]; then
		chmod 755 "$(dirname "$PG_DATA")"
		[ -L "$DATA/postgres" ] || [ ! -e "$DATA/postgres" ] || fail postgres "$DATA/postgres exists but user postgres cannot reach $DATA; make its parent directories world-executable (chmod o+x) or move the clone"
		if [ ! -L "$DATA/postgres" ]; then
			say postgres "user postgres cannot reach $DATA: cluster files in $(dirname "$PG_DATA") (symlinked)"
		fi
		ln -sfn "$PG_DATA" "$DATA/postgres"
		ln -sfn "$PG_LOG" "$LOGS/postgres.log"
	fi

	# A server killed a moment ago may still look alive: wait until it
	# answers or is gone, and start it again in the second case.
	if pg_running && ! wait_until "$HEALTH_TIMEOUT" pg_ready_or_gone; then
		fail postgres "running but not accepting connections on 127.0.0.1:$PG_PORT within ${HEALTH_TIMEOUT}s" "$PG_LOG"
	fi
	if pg_running; then
		say postgres "running (127.0.0.1:$PG_PORT)"
	elif port_open "$PG_PORT" && pg_external_ok; then
		external postgres "PostgreSQL on 127.0.0.1:$PG_PORT with role and database orderflow"
		return 0
	else
		if [ ! -f "$PG_DATA/PG_VERSION" ]; then
			say postgres "initialising cluster in $PG_DATA"
			if ! as_pg "$bin/initdb" -D "$PG_DATA" -U postgres -E UTF8 --locale=C.UTF-8 \
				--auth-local=trust --auth-host=scram-sha-256 >>"$PG_LOG" 2>&1; then
				fail postgres "initdb failed: $(last_error "$PG_LOG")" "$PG_LOG"
			fi
			echo "include_if_exists = 'orderflow.conf'" >>"$PG_DATA/postgresql.conf"
		fi
		require_free_port postgres "$PG_PORT"
		pg_tls_cert
		pg_write_conf
		say postgres "starting on 127.0.0.1:$PG_PORT"
		if ! as_pg "$bin/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t "$HEALTH_TIMEOUT" start >/dev/null 2>&1; then
			fail postgres "did not start within ${HEALTH_TIMEOUT}s: $(last_error "$PG_LOG")" "$PG_LOG"
		fi
	fi
	wait_until "$HEALTH_TIMEOUT" pg_ready ||
		fail postgres "not accepting connections on 127.0.0.1:$PG_PORT" "$PG_LOG"
	pg_psql >>"$PG_LOG" 2>&1 <<'EOF' || fail postgres "could not create role and database orderflow" "$PG_LOG"
SELECT 'CREATE ROLE orderflow LOGIN CREATEDB PASSWORD ''orderflow'''
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'orderflow') \gexec
-- The tests create throwaway roles with passwords of their own (secrets
-- they look for in the programs' output).
ALTER ROLE orderflow CREATEROLE;
SELECT 'CREATE DATABASE orderflow OWNER orderflow'
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'orderflow') \gexec
EOF
	say postgres "healthy: postgres://orderflow:orderflow@127.0.0.1:$PG_PORT/orderflow"
	pg_tls_publish
	pg_tls_note
}

pg_down() {
	local bin
	if pg_running; then
		bin=$(pg_bindir)
		as_pg "$bin/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >/dev/null 2>&1 ||
			fail postgres "pg_ctl stop failed" "$PG_LOG"
	fi
	say postgres "stopped"
}

# pg_tls_note: where the root certificate for verify-full is; or, for a
# server started before the script turned TLS on, how to turn it on.
pg_tls_note() {
	if ! pg_tls_on; then
		say postgres "TLS off (server started by an older scripts/stack.sh); turn it on with: scripts/stack.sh down postgres && make up"
	elif [ -f "$PG_TLS_ROOT" ]; then
		say postgres "TLS on, root certificate $PG_TLS_ROOT (sslmode=verify-full&sslrootcert=$PG_TLS_ROOT)"
	else
		say postgres "TLS on, root certificate $PG_DATA/server.crt (make up copies it to $PG_TLS_ROOT)"
	fi
}

pg_status() {
	if pg_running; then
		say postgres "running  127.0.0.1:$PG_PORT  data $PG_DATA  log $PG_LOG"
		pg_tls_note
	else
		say postgres "stopped  data $PG_DATA  log $PG_LOG$(port_note "$PG_PORT")"
		return 1
	fi
}

# ---------------------------------------------------------------- Temporal

# Profiles (ORDERFLOW_TEMPORAL_PROFILE, or `make up TEMPORAL=...`):
#   dev     `temporal server start-dev` of the Temporal CLI: one process, a
#           SQLite file in WAL mode, the Web UI built in (the default; `make
#           demo` and `make test` use it, and the end-to-end test restarts it)
#   server  the Temporal server (go.temporal.io/server) on the local
#           PostgreSQL, its services in one process, with a chosen number of
#           history shards, and the Web UI server beside it (see
#           "profile server" below)
# Each profile keeps its files apart, so switching needs a `make down` first
# but loses nothing.
#
# Dev profile only: ORDERFLOW_TEMPORAL_SQLITE_PRAGMAS (default
# "journal_mode=wal synchronous=NORMAL") are the SQLite pragmas of the dev
# server, space-separated; ORDERFLOW_TEMPORAL_DEV_ARGS (default empty) are
# further arguments of `temporal server start-dev`, split at spaces, for
# example "--dynamic-config-value matching.numTaskqueueReadPartitions=1".
# The benchmark's tuning mode measures such variants on dev servers of its
# own.
TEMPORAL_PROFILE=${ORDERFLOW_TEMPORAL_PROFILE:-dev}
case $TEMPORAL_PROFILE in
dev | server) ;;
*)
	echo "stack: unknown Temporal profile '$TEMPORAL_PROFILE' (known: dev, server)" >&2
	exit 2
	;;
esac

TEMPORAL_BIN=$CACHE/temporal-$TEMPORAL_VERSION/temporal
TEMPORAL_DIR=$DATA/temporal
TEMPORAL_PID=$TEMPORAL_DIR/temporal.pid
TEMPORAL_LOG=$LOGS/temporal.log

temporal_build() {
	local log=$LOGS/temporal-build.log tmp
	command -v go >/dev/null 2>&1 || fail temporal "go not found; install Go 1.26 to build the Temporal CLI"
	say temporal "building CLI v$TEMPORAL_VERSION into $TEMPORAL_BIN (a few minutes, once per machine)"
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/.temporal-build.XXXXXX")
	if ! (cd "$tmp" && GOBIN=$tmp GOFLAGS=-mod=mod go install "github.com/temporalio/cli/cmd/temporal@v$TEMPORAL_VERSION") >"$log" 2>&1; then
		rm -rf "$tmp"
		fail temporal "building the Temporal CLI from the Go module proxy failed; check network access and GOPROXY, then run make up again" "$log"
	fi
	mkdir -p "$(dirname "$TEMPORAL_BIN")"
	chmod 755 "$tmp/temporal"
	mv -f "$tmp/temporal" "$TEMPORAL_BIN"
	rm -rf "$tmp"
}

temporal_running() { pid_alive "$TEMPORAL_PID" "start-dev"; }

temporal_healthy() {
	"$TEMPORAL_BIN" operator cluster health --address "127.0.0.1:$TEMPORAL_PORT" --command-timeout 5s 2>/dev/null | grep -q SERVING &&
		"$TEMPORAL_BIN" operator search-attribute list --address "127.0.0.1:$TEMPORAL_PORT" --namespace default --command-timeout 5s 2>/dev/null | grep -q OrderStatus &&
		port_open "$TEMPORAL_UI_PORT"
}

# temporal_healthy_or_gone: a process killed a moment ago may still look
# alive; this waits for it to answer or to be gone.
temporal_healthy_or_gone() { ! temporal_running || temporal_healthy; }

# dev_pragma_args prints a --sqlite-pragma argument per pragma of
# ORDERFLOW_TEMPORAL_SQLITE_PRAGMAS.
dev_pragma_args() {
	local p
	for p in ${ORDERFLOW_TEMPORAL_SQLITE_PRAGMAS:-journal_mode=wal synchronous=NORMAL}; do
		printf -- '--sqlite-pragma %s ' "$p"
	done
}

temporal_up() {
	if [ "$TEMPORAL_PROFILE" = server ]; then
		tserver_up
		return
	fi
	[ -x "$TEMPORAL_BIN" ] || temporal_build
	mkdir -p "$TEMPORAL_DIR"
	if temporal_running && ! wait_until "$HEALTH_TIMEOUT" temporal_healthy_or_gone; then
		fail temporal "running but not healthy within ${HEALTH_TIMEOUT}s" "$TEMPORAL_LOG"
	fi
	if temporal_running; then
		say temporal "running (127.0.0.1:$TEMPORAL_PORT)"
	elif tserver_on_port; then
		fail temporal "the server profile runs on 127.0.0.1:$TEMPORAL_PORT; stop it first with: make down TEMPORAL=server"
	elif port_open "$TEMPORAL_PORT" && temporal_healthy; then
		external temporal "Temporal server on 127.0.0.1:$TEMPORAL_PORT with search attribute OrderStatus"
		return 0
	else
		require_free_port temporal "$TEMPORAL_PORT"
		require_free_port temporal "$TEMPORAL_UI_PORT"
		say temporal "starting on 127.0.0.1:$TEMPORAL_PORT, UI on 127.0.0.1:$TEMPORAL_UI_PORT"
		echo "=== $(date -u +%FT%TZ) starting temporal server start-dev" >>"$TEMPORAL_LOG"
		spawn "$TEMPORAL_PID" "$TEMPORAL_LOG" "$TEMPORAL_BIN" server start-dev \
			--ip 127.0.0.1 --port "$TEMPORAL_PORT" --ui-port "$TEMPORAL_UI_PORT" \
			--namespace default \
			--db-filename "$TEMPORAL_DIR/temporal.db" \
			$(dev_pragma_args) \
			--search-attribute OrderStatus=Keyword \
			--log-level warn --color never ${ORDERFLOW_TEMPORAL_DEV_ARGS:-}
	fi
	if ! wait_until "$HEALTH_TIMEOUT" temporal_healthy; then
		temporal_running || fail temporal "the server exited during startup: $(last_error "$TEMPORAL_LOG")" "$TEMPORAL_LOG"
		fail temporal "not healthy within ${HEALTH_TIMEOUT}s (frontend 127.0.0.1:$TEMPORAL_PORT, search attribute OrderStatus, UI :$TEMPORAL_UI_PORT)" "$TEMPORAL_LOG"
	fi
	say temporal "healthy: 127.0.0.1:$TEMPORAL_PORT, UI http://127.0.0.1:$TEMPORAL_UI_PORT"
}

temporal_down() {
	if [ "$TEMPORAL_PROFILE" = server ]; then
		tserver_down
		return
	fi
	stop_pid temporal "$TEMPORAL_PID" "start-dev"
}

temporal_status() {
	if [ "$TEMPORAL_PROFILE" = server ]; then
		tserver_status
		return
	fi
	if temporal_running; then
		say temporal "running  127.0.0.1:$TEMPORAL_PORT  UI http://127.0.0.1:$TEMPORAL_UI_PORT  pid $(cat "$TEMPORAL_PID")  log $TEMPORAL_LOG"
	else
		say temporal "stopped  log $TEMPORAL_LOG$(port_note "$TEMPORAL_PORT")"
		return 1
	fi
}

# ------------------------------------------------ Temporal, profile server
#
# The Temporal server built from the Go module proxy (go.temporal.io/server:
# cmd/server, and cmd/tools/sql, the SQL schema tool, with the schema it
# embeds), on two databases of the local PostgreSQL on ORDERFLOW_PG_PORT:
# ORDERFLOW_TEMPORAL_DB (default temporal) and the same name with
# _visibility, owned by the role temporal (password temporal). Frontend,
# history, matching and worker run in one process; from the Temporal port P
# (ORDERFLOW_TEMPORAL_PORT) it takes
#   P        frontend gRPC, the address clients use
#   P+1..3   history, matching and worker gRPC
#   P+4..7   membership of frontend, history, matching and worker
#   P+8      frontend HTTP API
#   P+9      the server's Prometheus metrics (/metrics)
# and the Web UI server (github.com/temporalio/ui-server, the version the CLI
# embeds) listens on ORDERFLOW_TEMPORAL_UI_PORT.
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
# TEMPORAL_ADDRESS=127.0.0.1:7333. Two server profiles on one PostgreSQL need
# different ORDERFLOW_TEMPORAL_DB: a server refuses databases in use.

TSERVER_VERSION=1.29.2
TSERVER_HOME=$CACHE/temporal-server-$TSERVER_VERSION
TSERVER_BIN=$TSERVER_HOME/temporal-server
TSERVER_SQL_TOOL=$TSERVER_HOME/temporal-sql-tool
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

# tserver_port N: the server's port P+N (see the table above).
tserver_port() { echo $((TEMPORAL_PORT + $1)); }

# go_build_into DIR LOG WHAT PACKAGE@VERSION... NAME...: go install the
# packages from the module proxy into a temporary folder of the cache, rename
# each binary to its NAME (in the packages' order), then move the folder to
# DIR, so that DIR is either complete or absent.
go_build_into() {
	local dir=$1 log=$2 what=$3 tmp pkg i
	local pkgs=() names=()
	shift 3
	while [ "$#" -gt 0 ] && [[ $1 == *@* ]]; do
		pkgs+=("$1")
		shift
	done
	names=("$@")
	command -v go >/dev/null 2>&1 || fail temporal "go not found; install Go 1.26 to build $what"
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/.temporal-build.XXXXXX")
	if ! (cd "$tmp" && GOBIN=$tmp/bin GOFLAGS=-mod=mod go install "${pkgs[@]}") >"$log" 2>&1; then
		rm -rf "$tmp"
		fail temporal "building $what from the Go module proxy failed; check network access and GOPROXY, then run make up again" "$log"
	fi
	mkdir -p "$tmp/out"
	for i in "${!pkgs[@]}"; do
		pkg=${pkgs[$i]%@*}
		mv "$tmp/bin/${pkg##*/}" "$tmp/out/${names[$i]}"
	done
	chmod 755 "$tmp/out" "$tmp/out"/*
	rm -rf "$dir"
	mv "$tmp/out" "$dir"
	rm -rf "$tmp"
}

tserver_build() {
	say temporal "building Temporal server v$TSERVER_VERSION and temporal-sql-tool into $TSERVER_HOME (about 10 minutes, once per machine)"
	go_build_into "$TSERVER_HOME" "$LOGS/temporal-server-build.log" "the Temporal server v$TSERVER_VERSION" \
		"go.temporal.io/server/cmd/server@v$TSERVER_VERSION" "go.temporal.io/server/cmd/tools/sql@v$TSERVER_VERSION" \
		temporal-server temporal-sql-tool
}

tui_build() {
	say temporal "building the Temporal UI server v$TUI_VERSION into $(dirname "$TUI_BIN") (a few minutes, once per machine)"
	go_build_into "$(dirname "$TUI_BIN")" "$LOGS/temporal-ui-build.log" "the Temporal UI server v$TUI_VERSION" \
		"github.com/temporalio/ui-server/v2/cmd/server@v$TUI_VERSION" temporal-ui-server
}

tserver_running() { pid_alive "$TSERVER_PID" "temporal-server --root"; }
tui_running() { pid_alive "$TUI_PID" "temporal-ui-server --root"; }
# One server (and UI) per data folder. tserver_running_port and
# tui_running_port: the ports they were started with, from their
# configuration files.
tserver_running_port() { sed -n 's/^      rpcAddress: 127.0.0.1:\([0-9]*\)$/\1/p' "$TSERVER_DIR/config/orderflow.yaml" 2>/dev/null; }
tui_running_port() { sed -n 's/^port: \([0-9]*\)$/\1/p' "$TUI_DIR/config/orderflow.yaml" 2>/dev/null; }
# tserver_on_port: this data folder's server profile serves the Temporal port.
tserver_on_port() { tserver_running && [ "$(tserver_running_port)" = "$TEMPORAL_PORT" ]; }

# tserver_serving: the frontend on the Temporal port answers health checks.
tserver_serving() {
	"$TEMPORAL_BIN" operator cluster health --address "127.0.0.1:$TEMPORAL_PORT" --command-timeout 5s 2>/dev/null | grep -q SERVING
}
tserver_serving_or_gone() { ! tserver_running || tserver_serving; }

# tserver_psql ARGS...: psql on database orderflow as role orderflow (which
# has CREATEROLE and CREATEDB), over TCP, so that it works the same on this
# clone's PostgreSQL and on another's.
tserver_psql() {
	PGPASSWORD=orderflow PGCONNECT_TIMEOUT=5 "$(pg_bindir)/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" \
		-U orderflow -d orderflow -v ON_ERROR_STOP=1 -v db="$TSERVER_DB" -v visdb="$TSERVER_VIS_DB" "$@"
}

# tserver_db: role temporal and the two databases, created when missing; the
# main one is stamped with the number of history shards when it is created,
# and a different number is refused.
tserver_db() {
	local comment shards
	pg_bindir >/dev/null && pg_external_ok ||
		fail temporal "the server profile needs PostgreSQL on 127.0.0.1:$PG_PORT with role orderflow; start it with: scripts/stack.sh up postgres"
	echo "=== $(date -u +%FT%TZ) databases $TSERVER_DB and $TSERVER_VIS_DB" >>"$TSERVER_SCHEMA_LOG"
	tserver_psql >>"$TSERVER_SCHEMA_LOG" 2>&1 <<EOF || fail temporal "could not create role temporal and databases $TSERVER_DB and $TSERVER_VIS_DB as role orderflow" "$TSERVER_SCHEMA_LOG"
SELECT 'CREATE ROLE temporal LOGIN PASSWORD ''temporal'''
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'temporal') \gexec
-- Membership lets orderflow create databases owned by temporal.
SELECT 'GRANT temporal TO orderflow'
WHERE NOT pg_has_role('orderflow', 'temporal', 'MEMBER') \gexec
SELECT unnest(ARRAY[format('CREATE DATABASE %I OWNER temporal', :'db'),
	format('COMMENT ON DATABASE %I IS %L', :'db', 'orderflow Temporal server: $TSERVER_SHARDS history shards')])
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SELECT format('CREATE DATABASE %I OWNER temporal', :'visdb')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'visdb') \gexec
EOF
	comment=$(tserver_psql -tA <<<"SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = :'db'" 2>>"$TSERVER_SCHEMA_LOG") || true
	shards=$(sed -n 's/^orderflow Temporal server: \([0-9]*\) history shards$/\1/p' <<<"$comment")
	if [ -n "$shards" ] && [ "$shards" != "$TSERVER_SHARDS" ]; then
		fail temporal "database $TSERVER_DB was set up with $shards history shards, fixed for its lifetime; set ORDERFLOW_TEMPORAL_SHARDS=$shards, or ORDERFLOW_TEMPORAL_DB=${TSERVER_DB}_$TSERVER_SHARDS for new databases with $TSERVER_SHARDS"
	fi
}

# tserver_db_unused: no session on the two databases; a second server on
# them would fight this one over the shards.
tserver_db_unused() {
	local n
	n=$(tserver_psql -tA <<<"SELECT count(*) FROM pg_stat_activity WHERE datname IN (:'db', :'visdb')" 2>>"$TSERVER_SCHEMA_LOG") || return 1
	[ "$n" = 0 ]
}

# tserver_sql_tool DATABASE ARGS...: temporal-sql-tool on DATABASE as role temporal.
tserver_sql_tool() {
	local db=$1
	shift
	SQL_PASSWORD=temporal "$TSERVER_SQL_TOOL" --plugin postgres12_pgx --endpoint 127.0.0.1 --port "$PG_PORT" \
		--user temporal --database "$db" "$@" >>"$TSERVER_SCHEMA_LOG" 2>&1
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

# tserver_write_conf: the server's configuration, config/orderflow.yaml in
# its folder (the server reads <root>/<config>/<env>.yaml).
# tserver_forget_members: delete the membership rows that earlier server
# processes left in the database (none runs now: see tserver_db_unused). A
# new server would first try to join them, which takes over 30 seconds when
# their ports changed or are taken by another program.
tserver_forget_members() {
	PGPASSWORD=temporal PGCONNECT_TIMEOUT=5 "$(pg_bindir)/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U temporal -d "$TSERVER_DB" \
		-v ON_ERROR_STOP=1 -c 'DELETE FROM cluster_membership' >>"$TSERVER_SCHEMA_LOG" 2>&1 ||
		fail temporal "could not clear table cluster_membership of database $TSERVER_DB" "$TSERVER_SCHEMA_LOG"
}

tserver_write_conf() {
	mkdir -p "$TSERVER_DIR/config"
	cat >"$TSERVER_DIR/config/orderflow.yaml" <<EOF
# Written by scripts/stack.sh on every start; edit the script, not this file.
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
        connectAddr: 127.0.0.1:$PG_PORT
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
        connectAddr: 127.0.0.1:$PG_PORT
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
# Written by scripts/stack.sh on every start; edit the script, not this file.
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
	local addr=(--address "127.0.0.1:$TEMPORAL_PORT" --command-timeout 10s)
	if ! "$TEMPORAL_BIN" operator namespace describe "${addr[@]}" --namespace default >/dev/null 2>&1; then
		"$TEMPORAL_BIN" operator namespace create "${addr[@]}" --namespace default --retention "$TSERVER_RETENTION" >>"$TSERVER_LOG" 2>&1
		return 1
	fi
	"$TEMPORAL_BIN" operator search-attribute list "${addr[@]}" --namespace default 2>/dev/null | grep -q OrderStatus && return 0
	"$TEMPORAL_BIN" operator search-attribute create "${addr[@]}" --namespace default --name OrderStatus --type Keyword >>"$TSERVER_LOG" 2>&1
	return 1
}

tserver_up() {
	local p
	[[ $TSERVER_SHARDS =~ ^[1-9][0-9]*$ ]] || fail temporal "ORDERFLOW_TEMPORAL_SHARDS must be a positive number, not '$TSERVER_SHARDS'"
	# The CLI checks health and registers the namespace and search attribute.
	[ -x "$TEMPORAL_BIN" ] || temporal_build
	[ -x "$TSERVER_BIN" ] && [ -x "$TSERVER_SQL_TOOL" ] || tserver_build
	[ -x "$TUI_BIN" ] || tui_build
	mkdir -p "$TSERVER_DIR" "$TUI_DIR"
	if tserver_running && ! tserver_on_port; then
		fail temporal "this data folder's server profile runs on 127.0.0.1:$(tserver_running_port), not $TEMPORAL_PORT; stop it first (scripts/stack.sh down temporal with its ORDERFLOW_TEMPORAL_PORT), or use another ORDERFLOW_DATA"
	fi
	if tui_running && [ "$(tui_running_port)" != "$TEMPORAL_UI_PORT" ]; then
		fail temporal "this data folder's UI server runs on 127.0.0.1:$(tui_running_port), not $TEMPORAL_UI_PORT; stop it first (scripts/stack.sh down temporal with its ports), or use another ORDERFLOW_DATA"
	fi
	if tserver_running && ! wait_until "$HEALTH_TIMEOUT" tserver_serving_or_gone; then
		fail temporal "running but not serving within ${HEALTH_TIMEOUT}s" "$TSERVER_LOG"
	fi
	if tserver_running; then
		say temporal "running (server profile, 127.0.0.1:$TEMPORAL_PORT)"
	elif ! tui_running && port_open "$TEMPORAL_PORT" && temporal_healthy; then
		external temporal "Temporal server on 127.0.0.1:$TEMPORAL_PORT with search attribute OrderStatus"
		return 0
	else
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
		echo "=== $(date -u +%FT%TZ) starting temporal-server" >>"$TSERVER_LOG"
		spawn "$TSERVER_PID" "$TSERVER_LOG" "$TSERVER_BIN" --root "$TSERVER_DIR" --config config --env orderflow --allow-no-auth start
	fi
	if ! wait_until "$HEALTH_TIMEOUT" tserver_serving; then
		tserver_running || fail temporal "the server exited during startup: $(last_error "$TSERVER_LOG")" "$TSERVER_LOG"
		fail temporal "frontend 127.0.0.1:$TEMPORAL_PORT not serving within ${HEALTH_TIMEOUT}s" "$TSERVER_LOG"
	fi
	wait_until "$HEALTH_TIMEOUT" tserver_namespace_ready ||
		fail temporal "namespace default with search attribute OrderStatus not registered within ${HEALTH_TIMEOUT}s: $(last_error "$TSERVER_LOG")" "$TSERVER_LOG"

	if tui_running; then
		say temporal "UI running (http://127.0.0.1:$TEMPORAL_UI_PORT)"
	else
		require_free_port temporal "$TEMPORAL_UI_PORT"
		tui_write_conf
		say temporal "starting the UI server v$TUI_VERSION on 127.0.0.1:$TEMPORAL_UI_PORT"
		echo "=== $(date -u +%FT%TZ) starting temporal-ui-server" >>"$TUI_LOG"
		spawn "$TUI_PID" "$TUI_LOG" "$TUI_BIN" --root "$TUI_DIR" --config config --env orderflow start
	fi
	if ! wait_until "$HEALTH_TIMEOUT" temporal_healthy; then
		tui_running || fail temporal "the UI server exited during startup: $(last_error "$TUI_LOG")" "$TUI_LOG"
		fail temporal "not healthy within ${HEALTH_TIMEOUT}s (frontend 127.0.0.1:$TEMPORAL_PORT, search attribute OrderStatus, UI :$TEMPORAL_UI_PORT)" "$TSERVER_LOG"
	fi
	say temporal "healthy: 127.0.0.1:$TEMPORAL_PORT (server profile, $TSERVER_SHARDS history shards), UI http://127.0.0.1:$TEMPORAL_UI_PORT, metrics http://127.0.0.1:$(tserver_port 9)/metrics"
}

tserver_down() {
	stop_pid temporal-ui "$TUI_PID" "temporal-ui-server --root"
	stop_pid temporal "$TSERVER_PID" "temporal-server --root" 60
}

tserver_status() {
	local rc=0
	if tserver_running; then
		say temporal "running  127.0.0.1:$(tserver_running_port)  server profile, $(sed -n 's/^  numHistoryShards: //p' "$TSERVER_DIR/config/orderflow.yaml") history shards  pid $(cat "$TSERVER_PID")  log $TSERVER_LOG"
	else
		say temporal "stopped  server profile  log $TSERVER_LOG$(port_note "$TEMPORAL_PORT")"
		rc=1
	fi
	if tui_running; then
		say temporal "UI running  http://127.0.0.1:$(tui_running_port)  pid $(cat "$TUI_PID")  log $TUI_LOG"
	else
		say temporal "UI stopped  log $TUI_LOG$(port_note "$TEMPORAL_UI_PORT")"
		rc=1
	fi
	return "$rc"
}

# ---------------------------------------------------------------- RocketMQ

ROCKETMQ_POM=$ROOT/deploy/rocketmq/pom.xml
ROCKETMQ_VERSION=$(sed -n 's:.*<rocketmq.version>\(.*\)</rocketmq.version>.*:\1:p' "$ROCKETMQ_POM")
ROCKETMQ_HOME_DIR=$CACHE/rocketmq-$ROCKETMQ_VERSION
# Profiles (ORDERFLOW_ROCKETMQ_PROFILE, or `make up ROCKETMQ=...`):
#   single  one broker (the default; `make demo` uses it)
#   ha      a broker group of two brokers in controller mode: the controller
#           runs inside the name server (ORDERFLOW_CONTROLLER_PORT, default
#           9878, serves the brokers and its Raft peers), the brokers listen on the broker port
#           and the broker port + 10, elect their master themselves and
#           replicate synchronously (see deploy/rocketmq/broker-ha.conf).
# Each profile keeps its data in a folder of its own, so switching needs a
# `make down` first but loses nothing.
ROCKETMQ_PROFILE=${ORDERFLOW_ROCKETMQ_PROFILE:-single}
CONTROLLER_PORT=${ORDERFLOW_CONTROLLER_PORT:-9878}
# How the broker flushes a message before acknowledging it: SYNC_FLUSH (on
# disk before the producer's acknowledgement, the default) or ASYNC_FLUSH.
BROKER_FLUSH=${ORDERFLOW_BROKER_FLUSH:-SYNC_FLUSH}
case $ROCKETMQ_PROFILE in
single)
	ROCKETMQ_DIR=$DATA/rocketmq
	BROKER_IDS=(0)
	NAMESRV_LOG=$LOGS/rocketmq-namesrv.log
	;;
ha)
	ROCKETMQ_DIR=$DATA/rocketmq-ha
	BROKER_IDS=(0 1)
	NAMESRV_LOG=$LOGS/rocketmq-ha-namesrv.log
	;;
*)
	echo "stack: unknown RocketMQ profile '$ROCKETMQ_PROFILE' (known: single, ha)" >&2
	exit 2
	;;
esac
case $BROKER_FLUSH in
SYNC_FLUSH | ASYNC_FLUSH) ;;
*)
	echo "stack: ORDERFLOW_BROKER_FLUSH must be SYNC_FLUSH or ASYNC_FLUSH, not '$BROKER_FLUSH'" >&2
	exit 2
	;;
esac
NAMESRV_PID=$ROCKETMQ_DIR/namesrv.pid
MQADMIN_LOG=$LOGS/rocketmq-admin.log

# Per broker N (0, or 0 and 1): its name for messages, pid file, log, port,
# store, and home (the JVM's user.home, where RocketMQ writes its own logs).
broker_name() { if [ "$ROCKETMQ_PROFILE" = ha ]; then echo "broker-$1"; else echo broker; fi; }
broker_pidfile() { echo "$ROCKETMQ_DIR/$(broker_name "$1").pid"; }
broker_log() { if [ "$ROCKETMQ_PROFILE" = ha ]; then echo "$LOGS/rocketmq-ha-$(broker_name "$1").log"; else echo "$LOGS/rocketmq-broker.log"; fi; }
broker_port() { echo $((BROKER_PORT + 10 * $1)); }
broker_home() { if [ "$ROCKETMQ_PROFILE" = ha ]; then echo "$ROCKETMQ_DIR/$(broker_name "$1")"; else echo "$ROCKETMQ_DIR"; fi; }
broker_store() { echo "$(broker_home "$1")/store"; }

java_check() {
	local v
	command -v java >/dev/null 2>&1 || fail rocketmq "java not found; install a JDK 17: apt-get install -y openjdk-17-jre-headless"
	v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
	if [ -z "$v" ] || [ "$v" -lt 17 ]; then
		fail rocketmq "java ${v:-?} found but RocketMQ needs Java 17 or newer; install openjdk-17-jre-headless and put it first on PATH"
	fi
}

# maven_fetch NAME POM DIR MARKER: unless DIR/lib/MARKER exists, copy the
# runtime dependencies of POM from Maven Central into DIR/lib, through a
# temporary folder, so that an interrupted fetch leaves no half folder and a
# second one finds everything in place.
maven_fetch() {
	local name=$1 pom=$2 dir=$3 marker=$4 log=$LOGS/$1-download.log tmp
	[ -f "$dir/lib/$marker" ] && return 0
	command -v mvn >/dev/null 2>&1 || fail "$name" "mvn not found; install Maven to fetch the jars: apt-get install -y maven"
	say "$name" "fetching $(basename "$dir") jars from Maven Central into $dir"
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/.$name-fetch.XXXXXX")
	if ! mvn -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$tmp/lib" >"$log" 2>&1; then
		rm -rf "$tmp"
		fail "$name" "downloading the jars from Maven Central failed; check network access to repo.maven.apache.org (or ~/.m2/settings.xml), then run make up again" "$log"
	fi
	rm -rf "$dir"
	chmod 755 "$tmp"
	mv "$tmp" "$dir"
}

rocketmq_fetch() {
	maven_fetch rocketmq "$ROCKETMQ_POM" "$ROCKETMQ_HOME_DIR" "rocketmq-broker-$ROCKETMQ_VERSION.jar"
}

# rocketmq_cmd HEAP_OPTS... -- MAIN ARGS...: sets RMQ_CMD to a JVM command
# with the RocketMQ class path and home (RMQ_HOME, default the broker's
# jars), and its logs and store inside the data folder (user.home).
rocketmq_cmd() {
	local opts=()
	while [ "$1" != "--" ]; do
		opts+=("$1")
		shift
	done
	shift
	local home=${RMQ_HOME:-$ROCKETMQ_HOME_DIR}
	RMQ_CMD=(env "ROCKETMQ_HOME=$home" java "${opts[@]}"
		-XX:+UseG1GC -XX:-OmitStackTraceInFastThrow
		--add-opens java.base/java.lang=ALL-UNNAMED
		--add-opens java.base/java.nio=ALL-UNNAMED
		--add-opens java.base/sun.nio.ch=ALL-UNNAMED
		--add-opens java.base/java.util=ALL-UNNAMED
		--add-exports java.base/jdk.internal.ref=ALL-UNNAMED
		"-Duser.home=${RMQ_USER_HOME:-$ROCKETMQ_DIR}"
		"-Drocketmq.home.dir=$home"
		-cp "$home/lib/*" "$@")
}

mqadmin() {
	rocketmq_cmd -Xms64m -Xmx128m -XX:TieredStopAtLevel=1 -- org.apache.rocketmq.tools.command.MQAdminStartup "$@"
	"${RMQ_CMD[@]}"
}

namesrv_running() { pid_alive "$NAMESRV_PID" "NamesrvStartup"; }
broker_running() { pid_alive "$(broker_pidfile "$1")" "BrokerStartup"; }
any_broker_running() {
	local i
	for i in "${BROKER_IDS[@]}"; do broker_running "$i" && return 0; done
	return 1
}

# A process killed a moment ago may still look alive: these wait for it to
# listen or to be gone.
namesrv_listening_or_gone() { ! namesrv_running || port_open "$NAMESRV_PORT"; }
broker_listening_or_gone() { ! broker_running "$1" || port_open "$(broker_port "$1")"; }

cluster_list() { mqadmin clusterList -n "127.0.0.1:$NAMESRV_PORT" 2>>"$MQADMIN_LOG"; }
broker_registered() { cluster_list | grep -q "$BROKER_IP:$(broker_port "$1")"; }
# ha_master_port: the port of the broker the controller elected master (the
# name server lists it with broker ID 0).
ha_master_port() {
	cluster_list | awk -v ip="$BROKER_IP" '$3 == "0" { split($4, a, ":"); if (a[1] == ip) { print a[2]; exit } }'
}
ha_ready() {
	local list
	list=$(cluster_list) || return 1
	# Both brokers registered, one of them as master (ID 0).
	grep -q "$BROKER_IP:$(broker_port 0)" <<<"$list" && grep -q "$BROKER_IP:$(broker_port 1)" <<<"$list" &&
		awk '$3 == "0" { found = 1 } END { exit !found }' <<<"$list"
}

# rocketmq_external_ok: the name server on the port routes topic
# ORDER_EVENTS to the broker on the broker port.
rocketmq_external_ok() {
	broker_registered 0 &&
		mqadmin topicRoute -n "127.0.0.1:$NAMESRV_PORT" -t "$ORDER_TOPIC" 2>>"$MQADMIN_LOG" | grep -q "$BROKER_IP:$BROKER_PORT"
}

# topic_mixed FILE: the broker's topic table FILE holds ORDER_EVENTS with
# the attribute message.type=MIXED (its keys are sorted: the attributes come
# first, writeQueueNums last).
topic_mixed() {
	awk -v start="\"$ORDER_TOPIC\":{" '
		index($0, start) { inside = 1 }
		inside && /"message\.type"[[:space:]]*:[[:space:]]*"MIXED"/ { mixed = 1 }
		inside && /"writeQueueNums"/ { exit }
		END { exit !mixed }' "$1" 2>/dev/null
}

# The topic's message type. Single profile: MIXED, so that RocketMQ 5
# clients (through the proxy) may send normal, FIFO, delayed and
# transactional messages to it; they check a topic's type before they send.
# Replicated profile: none (NORMAL): with RocketMQ 5.3.3 a replica fails to
# copy its master's topics as soon as one of them has an attribute ("only
# add attribute is supported while creating topic", apache/rocketmq#9403,
# fixed after 5.3.3), which would leave the replica without the topic.
if [ "$ROCKETMQ_PROFILE" = ha ]; then TOPIC_TYPE=""; else TOPIC_TYPE=MIXED; fi

# topic_ready: every broker holds ORDER_EVENTS, of the profile's type.
topic_ready() {
	local i f
	for i in "${BROKER_IDS[@]}"; do
		f=$(broker_store "$i")/config/topics.json
		if [ -n "$TOPIC_TYPE" ]; then
			topic_mixed "$f" || return 1
		else
			grep -q "\"$ORDER_TOPIC\"" "$f" 2>/dev/null || return 1
		fi
	done
}

# topic_create MASTER_PORT: create ORDER_EVENTS on the master broker, or
# update it, of the profile's type. The brokers refuse MIXED unless
# enableMixedMessageType is on: broker.conf turns it on, and so does this,
# at run time, for a broker started with an older broker.conf (its topic
# created NORMAL by an older scripts/stack.sh).
topic_create() {
	local master=$1 i attrs=()
	if [ -n "$TOPIC_TYPE" ]; then
		say rocketmq "creating topic $ORDER_TOPIC with $ORDER_TOPIC_QUEUES queues (message.type=$TOPIC_TYPE)"
		for i in "${BROKER_IDS[@]}"; do
			mqadmin updateBrokerConfig -b "127.0.0.1:$(broker_port "$i")" -k enableMixedMessageType -v true >>"$MQADMIN_LOG" 2>&1 ||
				fail rocketmq "could not turn on enableMixedMessageType on broker 127.0.0.1:$(broker_port "$i")" "$MQADMIN_LOG"
		done
		attrs=(-a "+message.type=$TOPIC_TYPE")
	else
		say rocketmq "creating topic $ORDER_TOPIC with $ORDER_TOPIC_QUEUES queues"
	fi
	mqadmin updateTopic -n "127.0.0.1:$NAMESRV_PORT" -b "127.0.0.1:$master" -t "$ORDER_TOPIC" \
		-r "$ORDER_TOPIC_QUEUES" -w "$ORDER_TOPIC_QUEUES" "${attrs[@]}" >>"$MQADMIN_LOG" 2>&1 ||
		fail rocketmq "could not create topic $ORDER_TOPIC" "$MQADMIN_LOG"
}

rocketmq_write_broker_conf() {
	local i=$1 store
	store=$(broker_store "$i")
	{
		cat "$ROOT/deploy/rocketmq/broker.conf"
		echo
		if [ "$ROCKETMQ_PROFILE" = ha ]; then
			cat "$ROOT/deploy/rocketmq/broker-ha.conf"
			echo
			echo "controllerAddr=127.0.0.1:$CONTROLLER_PORT"
		fi
		echo "# Added by scripts/stack.sh: store inside the data folder, ports, flushing."
		echo "storePathRootDir=$store"
		echo "storePathCommitLog=$store/commitlog"
		echo "namesrvAddr=127.0.0.1:$NAMESRV_PORT"
		echo "listenPort=$(broker_port "$i")"
		echo "brokerIP1=$BROKER_IP"
		echo "flushDiskType=$BROKER_FLUSH"
	} >"$(broker_home "$i")/broker.conf"
}

rocketmq_write_namesrv_conf() {
	{
		cat "$ROOT/deploy/rocketmq/namesrv.conf"
		echo
		echo "# Added by scripts/stack.sh."
		echo "listenPort=$NAMESRV_PORT"
		if [ "$ROCKETMQ_PROFILE" = ha ]; then
			echo "# The controller (broker master election) inside the name server."
			echo "enableControllerInNamesrv=true"
			echo "controllerDLegerGroup=orderflow"
			echo "controllerDLegerPeers=n0-127.0.0.1:$CONTROLLER_PORT"
			echo "controllerDLegerSelfId=n0"
			echo "controllerStorePath=$ROCKETMQ_DIR/controller"
			echo "enableElectUncleanMaster=false"
			echo "notifyBrokerRoleChanged=true"
		fi
	} >"$ROCKETMQ_DIR/namesrv.conf"
}

# broker_start N: start broker N unless it runs; sets started=1 when it did.
broker_start() {
	local i=$1 port log name p
	port=$(broker_port "$i")
	log=$(broker_log "$i")
	name=$(broker_name "$i")
	wait_until "$HEALTH_TIMEOUT" broker_listening_or_gone "$i" ||
		fail "$name" "running but not listening on 127.0.0.1:$port within ${HEALTH_TIMEOUT}s" "$log"
	if broker_running "$i"; then
		say "$name" "running (127.0.0.1:$port)"
		return 0
	fi
	for p in "$port" $((port - 2)) $((port + 1)); do
		require_free_port "$name" "$p"
	done
	mkdir -p "$(broker_store "$i")"
	rocketmq_write_broker_conf "$i"
	say "$name" "starting on 127.0.0.1:$port ($BROKER_FLUSH)"
	echo "=== $(date -u +%FT%TZ) starting broker" >>"$log"
	RMQ_USER_HOME=$(broker_home "$i") rocketmq_cmd -Xms256m -Xmx512m -XX:MaxDirectMemorySize=256m -- \
		org.apache.rocketmq.broker.BrokerStartup -c "$(broker_home "$i")/broker.conf"
	spawn "$(broker_pidfile "$i")" "$log" "${RMQ_CMD[@]}"
	started=1
}

broker_wait_listening() {
	local i=$1 port log name
	port=$(broker_port "$i")
	log=$(broker_log "$i")
	name=$(broker_name "$i")
	if ! wait_until "$HEALTH_TIMEOUT" port_open "$port"; then
		broker_running "$i" || fail "$name" "the broker exited during startup: $(last_error "$log")" "$log"
		fail "$name" "not listening on 127.0.0.1:$port within ${HEALTH_TIMEOUT}s" "$log"
	fi
}

rocketmq_up() {
	local started=0 i master
	java_check
	rocketmq_fetch
	mkdir -p "$ROCKETMQ_DIR"

	if [ "$ROCKETMQ_PROFILE" = single ] && ! namesrv_running && ! any_broker_running &&
		port_open "$NAMESRV_PORT" && port_open "$BROKER_PORT" && rocketmq_external_ok; then
		external rocketmq "RocketMQ name server 127.0.0.1:$NAMESRV_PORT and broker 127.0.0.1:$BROKER_PORT with topic $ORDER_TOPIC"
		return 0
	fi

	wait_until "$HEALTH_TIMEOUT" namesrv_listening_or_gone ||
		fail namesrv "running but not listening on 127.0.0.1:$NAMESRV_PORT within ${HEALTH_TIMEOUT}s" "$NAMESRV_LOG"
	if namesrv_running; then
		say namesrv "running (127.0.0.1:$NAMESRV_PORT)"
	else
		require_free_port namesrv "$NAMESRV_PORT"
		if [ "$ROCKETMQ_PROFILE" = ha ]; then require_free_port controller "$CONTROLLER_PORT"; fi
		say namesrv "starting on 127.0.0.1:$NAMESRV_PORT"
		echo "=== $(date -u +%FT%TZ) starting name server" >>"$NAMESRV_LOG"
		rocketmq_write_namesrv_conf
		rocketmq_cmd -Xms128m -Xmx256m -XX:MaxDirectMemorySize=128m -- \
			org.apache.rocketmq.namesrv.NamesrvStartup -c "$ROCKETMQ_DIR/namesrv.conf"
		spawn "$NAMESRV_PID" "$NAMESRV_LOG" "${RMQ_CMD[@]}"
		started=1
	fi
	if ! wait_until "$HEALTH_TIMEOUT" port_open "$NAMESRV_PORT"; then
		namesrv_running || fail namesrv "the name server exited during startup: $(last_error "$NAMESRV_LOG")" "$NAMESRV_LOG"
		fail namesrv "not listening on 127.0.0.1:$NAMESRV_PORT within ${HEALTH_TIMEOUT}s" "$NAMESRV_LOG"
	fi

	for i in "${BROKER_IDS[@]}"; do broker_start "$i"; done
	for i in "${BROKER_IDS[@]}"; do broker_wait_listening "$i"; done

	# Registration and the topic are checked with the admin tool (a JVM start
	# of a few seconds), so only after something was (re)started.
	if [ "$started" -eq 1 ] || ! topic_ready; then
		say rocketmq "waiting for registration with the name server"
		if [ "$ROCKETMQ_PROFILE" = ha ]; then
			wait_until "$HEALTH_TIMEOUT" ha_ready ||
				fail rocketmq "the two brokers did not register, one of them elected master, within ${HEALTH_TIMEOUT}s" "$(broker_log 0)"
		else
			wait_until "$HEALTH_TIMEOUT" broker_registered 0 ||
				fail broker "not registered with the name server 127.0.0.1:$NAMESRV_PORT within ${HEALTH_TIMEOUT}s" "$(broker_log 0)"
		fi
		if ! topic_ready; then
			master=$BROKER_PORT
			if [ "$ROCKETMQ_PROFILE" = ha ]; then master=$(ha_master_port); fi
			topic_create "$master"
			# A replica copies the master's topics within seconds.
			wait_until "$HEALTH_TIMEOUT" topic_ready ||
				fail rocketmq "topic $ORDER_TOPIC missing, or not of message.type ${TOPIC_TYPE:-NORMAL}, after creation" "$MQADMIN_LOG"
		fi
	fi
	if [ "$ROCKETMQ_PROFILE" = ha ]; then
		say rocketmq "healthy: name server and controller 127.0.0.1:$NAMESRV_PORT, brokers 127.0.0.1:$(broker_port 0) and 127.0.0.1:$(broker_port 1) (master 127.0.0.1:$(ha_master_port)), topic $ORDER_TOPIC (message.type NORMAL: RocketMQ 5 clients send only normal messages to it)"
	else
		say rocketmq "healthy: name server 127.0.0.1:$NAMESRV_PORT, broker 127.0.0.1:$BROKER_PORT, topic $ORDER_TOPIC (message.type=$TOPIC_TYPE)"
	fi
}

rocketmq_down() {
	local i
	for i in "${BROKER_IDS[@]}"; do stop_pid "$(broker_name "$i")" "$(broker_pidfile "$i")" "BrokerStartup"; done
	stop_pid namesrv "$NAMESRV_PID" "NamesrvStartup"
}

rocketmq_status() {
	local rc=0 i
	if namesrv_running; then
		say namesrv "running  127.0.0.1:$NAMESRV_PORT  pid $(cat "$NAMESRV_PID")  log $NAMESRV_LOG"
	else
		say namesrv "stopped  log $NAMESRV_LOG$(port_note "$NAMESRV_PORT")"
		rc=1
	fi
	for i in "${BROKER_IDS[@]}"; do
		if broker_running "$i"; then
			say "$(broker_name "$i")" "running  127.0.0.1:$(broker_port "$i")  pid $(cat "$(broker_pidfile "$i")")  log $(broker_log "$i") (details: $(broker_home "$i")/logs/rocketmqlogs)"
		else
			say "$(broker_name "$i")" "stopped  log $(broker_log "$i")$(port_note "$(broker_port "$i")")"
			rc=1
		fi
	done
	return "$rc"
}

# ---------------------------------------------------------------- RocketMQ proxy

# The RocketMQ 5 proxy, the endpoint of gRPC clients (rocketmq-client-java
# 5.x and the other languages' 5.x clients): ProxyStartup in cluster mode,
# a JVM of its own beside the broker (its jars in a cache folder of their
# own), finding the brokers through the name server. It listens on all
# interfaces: gRPC on ORDERFLOW_PROXY_PORT (default 8081) and the remoting
# protocol on ORDERFLOW_PROXY_REMOTING_PORT (default 8080). orderflow itself
# does not use it.
PROXY_POM=$ROOT/deploy/rocketmq/proxy/pom.xml
PROXY_VERSION=$(sed -n 's:.*<rocketmq.version>\(.*\)</rocketmq.version>.*:\1:p' "$PROXY_POM")
PROXY_HOME_DIR=$CACHE/rocketmq-proxy-$PROXY_VERSION
PROXY_PORT=${ORDERFLOW_PROXY_PORT:-8081}
PROXY_REMOTING_PORT=${ORDERFLOW_PROXY_REMOTING_PORT:-8080}
PROXY_DIR=$ROCKETMQ_DIR/proxy
PROXY_PID=$PROXY_DIR/proxy.pid
if [ "$ROCKETMQ_PROFILE" = ha ]; then
	PROXY_LOG=$LOGS/rocketmq-ha-proxy.log
else
	PROXY_LOG=$LOGS/rocketmq-proxy.log
fi

# The Java clients the interop tests (package interop) publish with, besides
# the remoting client among the broker's jars: rocketmq-client-java (gRPC,
# its dependencies shaded into it) and Gson, a class path of their own.
CLIENTS_POM=$ROOT/interop/java/pom.xml
CLIENTS_VERSION=$(sed -n 's:.*<rocketmq-client-java.version>\(.*\)</rocketmq-client-java.version>.*:\1:p' "$CLIENTS_POM")
CLIENTS_DIR=$CACHE/rocketmq-client-java-$CLIENTS_VERSION

proxy_fetch() {
	maven_fetch proxy "$PROXY_POM" "$PROXY_HOME_DIR" "rocketmq-proxy-$PROXY_VERSION.jar"
}

# clients_fetch: the interop tests' Java clients (see CLIENTS_POM); `up` of
# every service fetches them once.
clients_fetch() {
	maven_fetch clients "$CLIENTS_POM" "$CLIENTS_DIR" "rocketmq-client-java-$CLIENTS_VERSION.jar"
}

proxy_running() { pid_alive "$PROXY_PID" "ProxyStartup"; }
proxy_listening_or_gone() { ! proxy_running || port_open "$PROXY_PORT"; }

# proxy_external_ok: whatever listens on the proxy port is a RocketMQ proxy
# (another clone's stack).
proxy_external_ok() {
	local pid
	pid=$(ss -ltnpH "sport = :$PROXY_PORT" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n1)
	[ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q ProxyStartup
}

proxy_write_conf() {
	cat >"$PROXY_DIR/rmq-proxy.json" <<EOF
{
  "rocketMQClusterName": "DefaultCluster",
  "namesrvAddr": "127.0.0.1:$NAMESRV_PORT",
  "proxyMode": "cluster",
  "grpcServerPort": $PROXY_PORT,
  "remotingListenPort": $PROXY_REMOTING_PORT,
  "enablePrintJstack": false
}
EOF
}

proxy_up() {
	java_check
	proxy_fetch
	mkdir -p "$PROXY_DIR"
	wait_until "$HEALTH_TIMEOUT" proxy_listening_or_gone ||
		fail proxy "running but not listening on port $PROXY_PORT within ${HEALTH_TIMEOUT}s" "$PROXY_LOG"
	if proxy_running; then
		say proxy "running (gRPC 127.0.0.1:$PROXY_PORT)"
		return 0
	fi
	if port_open "$PROXY_PORT" && proxy_external_ok; then
		external proxy "RocketMQ proxy on port $PROXY_PORT"
		return 0
	fi
	port_open "$NAMESRV_PORT" ||
		fail proxy "the name server 127.0.0.1:$NAMESRV_PORT is not running; start it first: scripts/stack.sh up rocketmq proxy"
	require_free_port proxy "$PROXY_PORT"
	require_free_port proxy "$PROXY_REMOTING_PORT"
	proxy_write_conf
	say proxy "starting on port $PROXY_PORT (gRPC) and $PROXY_REMOTING_PORT (remoting)"
	echo "=== $(date -u +%FT%TZ) starting proxy" >>"$PROXY_LOG"
	RMQ_HOME=$PROXY_HOME_DIR RMQ_USER_HOME=$PROXY_DIR rocketmq_cmd -Xms64m -Xmx192m -XX:MaxDirectMemorySize=64m -- \
		org.apache.rocketmq.proxy.ProxyStartup -pc "$PROXY_DIR/rmq-proxy.json" -pm cluster
	spawn "$PROXY_PID" "$PROXY_LOG" "${RMQ_CMD[@]}"
	if ! wait_until "$HEALTH_TIMEOUT" port_open "$PROXY_PORT"; then
		proxy_running || fail proxy "the proxy exited during startup: $(last_error "$PROXY_LOG")" "$PROXY_LOG"
		fail proxy "not listening on port $PROXY_PORT within ${HEALTH_TIMEOUT}s" "$PROXY_LOG"
	fi
	say proxy "healthy: gRPC endpoint 127.0.0.1:$PROXY_PORT, name server 127.0.0.1:$NAMESRV_PORT"
}

proxy_down() { stop_pid proxy "$PROXY_PID" "ProxyStartup"; }

proxy_status() {
	if proxy_running; then
		say proxy "running  127.0.0.1:$PROXY_PORT (gRPC), $PROXY_REMOTING_PORT (remoting)  pid $(cat "$PROXY_PID")  log $PROXY_LOG (details: $PROXY_DIR/logs/rocketmqlogs)"
	else
		say proxy "stopped  log $PROXY_LOG$(port_note "$PROXY_PORT")"
		return 1
	fi
}

# ---------------------------------------------------------------- Redis

REDIS_DIR=$DATA/redis
REDIS_PID=$REDIS_DIR/redis.pid
REDIS_CONF=$REDIS_DIR/redis.conf
REDIS_LOG=$LOGS/redis.log

# redis_bin: Debian's redis-server.
redis_bin() {
	local b
	for b in "$(command -v redis-server 2>/dev/null)" /usr/bin/redis-server /usr/sbin/redis-server; do
		if [ -n "$b" ] && [ -x "$b" ]; then
			echo "$b"
			return 0
		fi
	done
	return 1
}

# redis_package_service_off LOGNAME: where an init system runs it, the
# package starts a server of its own on 6379; stop and disable it, so that
# the stack's server gets the port. Called only right after this script
# installed the package.
redis_package_service_off() {
	local log=$LOGS/$1-install.log
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet redis-server 2>/dev/null; then
		say redis "stopping and disabling the package's own redis-server service"
		systemctl disable --now redis-server >>"$log" 2>&1 || true
	elif [ -x /etc/init.d/redis-server ] && /etc/init.d/redis-server status >/dev/null 2>&1; then
		say redis "stopping and disabling the package's own redis-server service"
		/etc/init.d/redis-server stop >>"$log" 2>&1 || true
		if command -v update-rc.d >/dev/null 2>&1; then update-rc.d redis-server disable >>"$log" 2>&1 || true; fi
	fi
}

redis_install() {
	if ! is_root; then
		fail redis "redis-server not found; install it with: sudo apt-get install -y redis-server"
	fi
	command -v apt-get >/dev/null 2>&1 || fail redis "redis-server not found and apt-get is missing; install Redis 6 or newer"
	say redis "installing Debian's redis-server package"
	apt_install redis redis-server
	redis_package_service_off redis
}

redis_running() { pid_alive "$REDIS_PID" "redis-server"; }

# redis_ping: whatever listens on the port answers PING with PONG (without
# a password: the stack's server has none).
redis_ping() {
	local reply
	reply=$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$REDIS_PORT && printf 'PING\r\n' >&3 && head -n1 <&3" 2>/dev/null) || return 1
	[ "${reply%$'\r'}" = "+PONG" ]
}

# redis_ping_or_gone: a server killed a moment ago may still look alive;
# this waits for it to answer or to be gone.
redis_ping_or_gone() { ! redis_running || redis_ping; }

redis_write_conf() {
	cat >"$REDIS_CONF" <<EOF
# Written by scripts/stack.sh on every start; edit the script, not this file.
# Redis is a cache in front of the ledger (order_events): losing keys costs
# the bridges a signal each, never correctness. So nothing is persisted, and
# memory is bounded by evicting the least recently used keys (every key the
# bridges write carries a TTL).
bind 127.0.0.1
port $REDIS_PORT
protected-mode yes
daemonize no
logfile ""
loglevel warning
dir $REDIS_DIR
save ""
appendonly no
maxmemory $REDIS_MAXMEMORY
maxmemory-policy volatile-lru
EOF
}

redis_up() {
	local bin
	bin=$(redis_bin) || { redis_install; bin=$(redis_bin) || fail redis "redis-server still missing after install" "$LOGS/redis-install.log"; }
	mkdir -p "$REDIS_DIR"
	if redis_running && ! wait_until "$HEALTH_TIMEOUT" redis_ping_or_gone; then
		fail redis "running but not answering PING on 127.0.0.1:$REDIS_PORT within ${HEALTH_TIMEOUT}s" "$REDIS_LOG"
	fi
	if redis_running; then
		say redis "running (127.0.0.1:$REDIS_PORT)"
	elif port_open "$REDIS_PORT" && redis_ping; then
		external redis "Redis on 127.0.0.1:$REDIS_PORT"
		return 0
	else
		require_free_port redis "$REDIS_PORT"
		redis_write_conf
		say redis "starting on 127.0.0.1:$REDIS_PORT"
		echo "=== $(date -u +%FT%TZ) starting redis-server" >>"$REDIS_LOG"
		spawn "$REDIS_PID" "$REDIS_LOG" "$bin" "$REDIS_CONF"
	fi
	if ! wait_until "$HEALTH_TIMEOUT" redis_ping; then
		redis_running || fail redis "the server exited during startup: $(last_error "$REDIS_LOG")" "$REDIS_LOG"
		fail redis "not answering PING on 127.0.0.1:$REDIS_PORT within ${HEALTH_TIMEOUT}s" "$REDIS_LOG"
	fi
	say redis "healthy: redis://127.0.0.1:$REDIS_PORT/0"
}

redis_down() { stop_pid redis "$REDIS_PID" "redis-server"; }

redis_status() {
	if redis_running; then
		say redis "running  127.0.0.1:$REDIS_PORT  pid $(cat "$REDIS_PID")  log $REDIS_LOG"
	else
		say redis "stopped  log $REDIS_LOG$(port_note "$REDIS_PORT")"
		return 1
	fi
}

# ---------------------------------------------------------------- main

SERVICES_ALL=(postgres temporal rocketmq proxy redis)

svc_do() {
	case $2 in
	postgres) "pg_$1" ;;
	temporal) "temporal_$1" ;;
	rocketmq) "rocketmq_$1" ;;
	proxy) "proxy_$1" ;;
	redis) "redis_$1" ;;
	esac
}

main() {
	local cmd=${1:-} svc rc=0 i
	shift || true
	if [ "$cmd" = mqadmin ]; then
		# The RocketMQ admin tool of the local stack, for operators and for
		# the fault tests (for example: mqadmin updateBrokerConfig -b
		# 127.0.0.1:10911 -k brokerPermission -v 4 makes the broker read-only).
		mqadmin "$@"
		return
	fi
	local svcs=("$@")
	if [ "${#svcs[@]}" -eq 0 ]; then svcs=("${SERVICES_ALL[@]}"); fi
	for svc in "${svcs[@]}"; do
		case $svc in
		postgres | temporal | rocketmq | proxy | redis) ;;
		*)
			echo "stack: unknown service '$svc' (known: ${SERVICES_ALL[*]})" >&2
			exit 2
			;;
		esac
	done
	mkdir -p "$DATA" "$LOGS"
	case $cmd in
	deps)
		deps
		;;
	up)
		for svc in "${svcs[@]}"; do svc_do up "$svc"; done
		if [ "$#" -eq 0 ]; then clients_fetch; fi
		;;
	down)
		# A full `down` first stops the worker and bridge `make demo` left running.
		if [ "$#" -eq 0 ] && [ -x "$ROOT/scripts/demo.sh" ]; then "$ROOT/scripts/demo.sh" stop; fi
		for ((i = ${#svcs[@]} - 1; i >= 0; i--)); do svc_do down "${svcs[$i]}"; done
		;;
	status)
		for svc in "${svcs[@]}"; do svc_do status "$svc" || rc=1; done
		return "$rc"
		;;
	*)
		echo "usage: $0 up|down|status [${SERVICES_ALL[*]}] | deps | mqadmin ARGS..." >&2
		exit 2
		;;
	esac
}

main "$@"
