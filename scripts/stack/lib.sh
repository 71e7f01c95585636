# shellcheck shell=bash
# lib.sh — what the service files share: folders, messages, ports, the shape
# of a start and of a status line, the download cache.

DATA=${ORDERFLOW_DATA:-$ROOT/.data}
CACHE=${ORDERFLOW_CACHE:-$HOME/.cache/orderflow}
LOGS=$DATA/logs
HEALTH_TIMEOUT=${ORDERFLOW_HEALTH_TIMEOUT:-120}

say() { printf '%-9s %s\n' "$1:" "$2"; }
# fail SERVICE MESSAGE [LOG]: one line naming the service, the reason and the
# log to read; then exit.
fail() { echo "stack: FAILED $1: $2${3:+ (log: $3)}" >&2; exit 1; }
usage_error() { echo "stack: $1" >&2; exit 2; }
# last_error LOG: the last line of LOG that looks like an error, shortened.
last_error() {
	local line
	line=$(tail -n 200 "$1" 2>/dev/null | grep -E -i 'error|exception|fatal|panic|already in use|denied|not found' | tail -n 1 | cut -c1-240 || true)
	echo "${line:-see the log}"
}
is_root() { [ "$(id -u)" -eq 0 ]; }
external() { say "$1" "using the already running $2 (not started from this clone; make down here leaves it alone)"; }

# port_open PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_open() { timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
# port_pid PORT: the process listening on PORT, when ss can tell.
port_pid() { ss -ltnpH "sport = :$1" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n1 || true; }
port_owner() {
	local p
	p=$(port_pid "$1")
	if [ -n "$p" ]; then echo "$(cat "/proc/$p/comm" 2>/dev/null) (pid $p)"; else echo "an unknown process"; fi
}
# port_note PORT: for status lines, who holds PORT, if anyone.
port_note() { if port_open "$1"; then echo "  (port $1 held by $(port_owner "$1"))"; fi; }
# require_free_port SERVICE PORT...: fail when another program holds a PORT.
require_free_port() {
	local p
	for p in "${@:2}"; do
		if port_open "$p"; then fail "$1" "port $p is already taken by another program: $(port_owner "$p"); stop it or free the port, then run make up again"; fi
	done
}

# wait_until SECONDS COMMAND...: poll COMMAND every half second.
wait_until() {
	local deadline=$((SECONDS + $1))
	until "${@:2}" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.5
	done
}

# spawn PIDFILE LOG COMMAND...: start COMMAND detached from this shell and its
# terminal, appending its output to LOG.
spawn() {
	echo "=== $(date -u +%FT%TZ) starting ${*:3}" >>"$2"
	setsid "${@:3}" >>"$2" 2>&1 </dev/null &
	echo $! >"$1"
}

# up_service NAME LOG WHERE FN [ARGS...]: the start every service shares,
# through FN_running, FN_healthy, FN_start and, if defined, FN_external (the
# port serves a working instance another clone started: used as it is), each
# called with ARGS. A process killed a moment ago may still look alive: it is
# given the time to answer or go.
up_service() {
	local name=$1 log=$2 where=$3 fn=$4
	shift 4
	if "${fn}_running" "$@" && ! wait_until "$HEALTH_TIMEOUT" healthy_or_gone "$fn" "$@"; then
		fail "$name" "running but not healthy on $where within ${HEALTH_TIMEOUT}s" "$log"
	fi
	if "${fn}_running" "$@"; then
		say "$name" "running ($where)"
	elif declare -F "${fn}_external" >/dev/null && "${fn}_external" "$@"; then
		external "$name" "$name on $where"
		return 0
	else
		"${fn}_start" "$@"
	fi
	if ! wait_until "$HEALTH_TIMEOUT" "${fn}_healthy" "$@"; then
		"${fn}_running" "$@" || fail "$name" "exited during startup: $(last_error "$log")" "$log"
		fail "$name" "not healthy on $where within ${HEALTH_TIMEOUT}s" "$log"
	fi
}
healthy_or_gone() { ! "${1}_running" "${@:2}" || "${1}_healthy" "${@:2}"; }

# show NAME PIDFILE PATTERN PORT LOG WHERE: NAME's status line; false when it
# does not run.
show() {
	pid_alive "$2" "$3" || { say "$1" "stopped  log $5$(port_note "$4")"; return 1; }
	say "$1" "running  $6  pid $(cat "$2")  log $5"
}

# into_cache NAME DIR WHAT COMMAND...: unless DIR exists, run COMMAND in a new
# folder of the cache, then move it to DIR: DIR is complete or absent.
into_cache() {
	local log=$LOGS/${2##*/}.log tmp
	[ ! -d "$2" ] || return 0
	say "$1" "fetching $3 into $2 (once per machine)"
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX")
	if ! (cd "$tmp" && "${@:4}") >"$log" 2>&1; then
		rm -rf "$tmp"
		fail "$1" "fetching $3 failed: $(last_error "$log"); check network access and the tools make deps installs, then run make up again" "$log"
	fi
	chmod 755 "$tmp"
	mv "$tmp" "$2"
}
# apt_install LOGNAME PACKAGE...: install Debian packages (deps.sh, which
# this loads only on a machine that lacks one).
apt_install() { . "$ROOT/scripts/stack/deps.sh" && apt_install "$@"; }

# maven_jars POM: (for into_cache) POM's runtime dependencies into lib/.
maven_jars() { mvn -B -f "$1" dependency:copy-dependencies -DoutputDirectory="$PWD/lib"; }
# go_binaries PACKAGE@VERSION=NAME...: (for into_cache) each package built
# from the Go module proxy, its binary named NAME.
go_binaries() {
	local spec pkg
	GOBIN=$PWD/bin GOFLAGS=-mod=mod go install "${@%=*}"
	for spec in "$@"; do
		pkg=${spec%%@*}
		mv "bin/${pkg##*/}" "${spec#*=}"
	done
	rmdir bin
}
