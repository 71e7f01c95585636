# shellcheck shell=bash
# postgres.sh — PostgreSQL: a cluster of Debian's binaries in <data>/postgres,
# with the settings of deploy/postgres/local.conf and role and database
# orderflow (password orderflow). It takes TLS and plain connections; its
# self-signed certificate (for 127.0.0.1 and localhost) is made once and
# copied to <data>/postgres-tls/root.crt for clients to trust.

PG_PORT=${ORDERFLOW_PG_PORT:-5432}
PG_DATA=$DATA/postgres
PG_LOG=$LOGS/postgres.log
PG_SOCK=$DATA/run/postgres
PG_TLS_ROOT=$DATA/postgres-tls/root.crt
# As root, the cluster runs as user postgres; when that user cannot reach the
# data folder (a clone under /root), the cluster lives in /var/lib/orderflow,
# symlinked from the data folder.
if is_root && id postgres >/dev/null 2>&1 && ! { mkdir -p "$DATA" && runuser -u postgres -- test -x "$DATA"; } 2>/dev/null; then
	PG_BASE=/var/lib/orderflow/$(printf '%s' "$DATA" | md5sum | cut -c1-12)
	PG_DATA=$PG_BASE/postgres PG_LOG=$PG_BASE/postgres.log PG_SOCK=$PG_BASE/run
fi
if [ "${#PG_SOCK}" -gt 90 ]; then PG_SOCK=/tmp/orderflow-pg-$(id -u); fi # a socket's path is short

# pg_bindir: the newest PostgreSQL server binaries installed, if any.
pg_bindir() {
	local d
	for d in /usr/lib/postgresql/*/bin; do if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; fi; done | sort -V | tail -n1
}
PG_BIN=$(pg_bindir)
# as_pg COMMAND...: run as the cluster's owner (postgres when root).
as_pg() { if is_root; then runuser -u postgres -- "$@"; else "$@"; fi; }
# pg_sql DATABASE ARGS...: psql as role orderflow over TCP.
pg_sql() { PGPASSWORD=orderflow PGCONNECT_TIMEOUT=5 "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U orderflow -d "$1" -v ON_ERROR_STOP=1 "${@:2}"; }
postgres_running() { [ -n "$PG_BIN" ] && [ -f "$PG_DATA/PG_VERSION" ] && as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; }
postgres_healthy() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"; }
postgres_external() { port_open "$PG_PORT" && [ "$(pg_sql orderflow -tAc 'SELECT 1' 2>/dev/null)" = 1 ]; }

# postgres_tls: the server's certificate and key, made once (both again when
# either is missing).
postgres_tls() {
	local crt=$PG_DATA/server.crt key=$PG_DATA/server.key log=$LOGS/postgres-tls.log
	if [ -s "$crt" ] && [ -s "$key" ]; then return 0; fi
	command -v openssl >/dev/null 2>&1 || apt_install postgres-openssl openssl
	say postgres "making a self-signed TLS certificate for 127.0.0.1 and localhost"
	(umask 077 && openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -subj "/CN=orderflow local PostgreSQL" \
		-addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -keyout "$key.tmp" -out "$crt.tmp") >"$log" 2>&1 ||
		fail postgres "openssl could not make the TLS certificate: $(last_error "$log")" "$log"
	chmod 644 "$crt.tmp"
	if is_root; then chown postgres: "$key.tmp" "$crt.tmp"; fi
	mv -f "$key.tmp" "$key"
	mv -f "$crt.tmp" "$crt"
}

postgres_start() {
	if [ ! -f "$PG_DATA/PG_VERSION" ]; then
		say postgres "initialising cluster in $PG_DATA"
		as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres -E UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 >>"$PG_LOG" 2>&1 ||
			fail postgres "initdb failed: $(last_error "$PG_LOG")" "$PG_LOG"
		echo "include_if_exists = 'orderflow.conf'" >>"$PG_DATA/postgresql.conf"
	fi
	require_free_port postgres "$PG_PORT"
	postgres_tls
	{
		echo "# Written by scripts/stack/postgres.sh from deploy/postgres/local.conf at every start."
		cat "$ROOT/deploy/postgres/local.conf"
		printf "%s\n" "port = $PG_PORT" "unix_socket_directories = '$PG_SOCK'" "ssl_cert_file = '$PG_DATA/server.crt'" "ssl_key_file = '$PG_DATA/server.key'"
	} >"$PG_DATA/orderflow.conf"
	if is_root; then chown postgres: "$PG_DATA/orderflow.conf"; fi
	say postgres "starting on 127.0.0.1:$PG_PORT"
	as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t "$HEALTH_TIMEOUT" start >/dev/null 2>&1 ||
		fail postgres "did not start within ${HEALTH_TIMEOUT}s: $(last_error "$PG_LOG")" "$PG_LOG"
}

postgres_up() {
	if [ -z "$PG_BIN" ]; then apt_install postgres postgresql && PG_BIN=$(pg_bindir); fi
	[ -n "$PG_BIN" ] || fail postgres "PostgreSQL binaries still missing after install" "$LOGS/postgres-install.log"
	if is_root && ! id postgres >/dev/null 2>&1; then fail postgres "user postgres is missing; reinstall Debian's postgresql-common"; fi
	mkdir -p "$PG_DATA" "$PG_SOCK"
	touch "$PG_LOG"
	if is_root; then chown postgres: "$PG_DATA" "$PG_SOCK" "$PG_LOG"; fi
	chmod 700 "$PG_DATA" "$PG_SOCK"
	if [ "$PG_DATA" != "$DATA/postgres" ]; then
		chmod 755 "$PG_BASE"
		[ -L "$DATA/postgres" ] || [ ! -e "$DATA/postgres" ] || fail postgres "$DATA/postgres exists but user postgres cannot reach $DATA; make its parent directories world-executable (chmod o+x) or move the clone"
		[ -L "$DATA/postgres" ] || say postgres "user postgres cannot reach $DATA: cluster files in $PG_BASE (symlinked)"
		ln -sfn "$PG_DATA" "$DATA/postgres"
		ln -sfn "$PG_LOG" "$LOGS/postgres.log"
	fi
	up_service postgres "$PG_LOG" "127.0.0.1:$PG_PORT" postgres
	postgres_running || return 0
	as_pg "$PG_BIN/psql" -X -q -h "$PG_SOCK" -p "$PG_PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 >>"$PG_LOG" 2>&1 <<'EOF' ||
SELECT 'CREATE ROLE orderflow LOGIN CREATEDB PASSWORD ''orderflow''' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'orderflow') \gexec
-- The tests create throwaway roles with passwords of their own.
ALTER ROLE orderflow CREATEROLE;
SELECT 'CREATE DATABASE orderflow OWNER orderflow' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'orderflow') \gexec
EOF
		fail postgres "could not create role and database orderflow" "$PG_LOG"
	say postgres "healthy: postgres://orderflow:orderflow@127.0.0.1:$PG_PORT/orderflow"
	if [ -s "$PG_DATA/server.crt" ] && ! cmp -s "$PG_DATA/server.crt" "$PG_TLS_ROOT"; then
		mkdir -p "${PG_TLS_ROOT%/*}"
		install -m 644 "$PG_DATA/server.crt" "$PG_TLS_ROOT.tmp"
		mv -f "$PG_TLS_ROOT.tmp" "$PG_TLS_ROOT"
	fi
	postgres_tls_note
}

# postgres_tls_note: where the root certificate is; or, for a server started
# before the stack turned TLS on, how to turn it on.
postgres_tls_note() {
	grep -qx 'ssl = on' "$PG_DATA/orderflow.conf" 2>/dev/null ||
		{ say postgres "TLS off (server started by an older scripts/stack.sh); turn it on with: scripts/stack.sh down postgres && make up" && return; }
	say postgres "TLS on, root certificate $PG_TLS_ROOT (sslmode=verify-full&sslrootcert=$PG_TLS_ROOT)"
}
postgres_down() {
	postgres_running && { as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >/dev/null 2>&1 || fail postgres "pg_ctl stop failed" "$PG_LOG"; }
	say postgres "stopped"
}
postgres_status() {
	postgres_running || { say postgres "stopped  data $PG_DATA  log $PG_LOG$(port_note "$PG_PORT")"; return 1; }
	say postgres "running  127.0.0.1:$PG_PORT  data $PG_DATA  log $PG_LOG"
	postgres_tls_note
}
