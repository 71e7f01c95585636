# shellcheck shell=bash
# deps.sh — the Debian packages the stack runs on: `scripts/stack.sh deps`
# installs what a machine lacks; `up` loads this file to install a missing
# server package (postgresql, redis-server, openssl) itself, as root.

# apt_install LOGNAME PACKAGE...: install Debian packages as root, keeping
# them from starting a PostgreSQL cluster or a Redis server of their own.
apt_install() {
	local log=$LOGS/$1-install.log
	shift
	is_root || fail install "missing: $*; install with: sudo apt-get install -y $*"
	command -v apt-get >/dev/null 2>&1 || fail install "missing: $*, and apt-get is not available to install them"
	say install "installing $*"
	mkdir -p /etc/postgresql-common/createcluster.d
	echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/orderflow.conf
	{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"; } >"$log" 2>&1 ||
		fail install "apt-get install $* failed; check the network and apt sources, then try again" "$log"
	if [[ " $* " == *" pgbouncer "* ]] && /etc/init.d/pgbouncer status >/dev/null 2>&1; then
		{ /etc/init.d/pgbouncer stop && update-rc.d pgbouncer disable; } >>"$log" 2>&1 || true
	fi
	if [[ " $* " == *" redis-server "* ]]; then
		if systemctl is-active --quiet redis-server 2>/dev/null; then systemctl disable --now redis-server >>"$log" 2>&1 || true; fi
		if /etc/init.d/redis-server status >/dev/null 2>&1; then { /etc/init.d/redis-server stop && update-rc.d redis-server disable; } >>"$log" 2>&1 || true; fi
	fi
}

# deps: what a fresh Debian machine lacks (as root): PostgreSQL, a Java 17 JDK
# (RocketMQ's runtime, javac for the interop tests), Maven, iproute2 (ss),
# openssl, Redis, PgBouncer (the tests put it in front of PostgreSQL). Go
# must be there already.
deps() {
	local pkgs=() p
	command -v go >/dev/null 2>&1 || fail deps "go not found; install Go 1.26 from https://go.dev/dl/ and put it on PATH"
	for p in java:openjdk-17-jdk-headless javac:openjdk-17-jdk-headless mvn:maven ss:iproute2 openssl:openssl; do
		command -v "${p%%:*}" >/dev/null 2>&1 || pkgs+=("${p#*:}")
	done
	[ -n "$(pg_bindir)" ] || pkgs+=(postgresql)
	redis_bin >/dev/null || pkgs+=(redis-server)
	command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || pkgs+=(pgbouncer)
	if [ "${#pkgs[@]}" -eq 0 ]; then say deps "nothing to install" && return 0; fi
	apt_install deps ca-certificates "${pkgs[@]}"
	say deps "installed ${pkgs[*]}"
}
