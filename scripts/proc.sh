# shellcheck shell=bash
# proc.sh — process helpers shared by stack.sh and demo.sh (sourced, not run).
# The sourcing script defines say.

# pid_alive PIDFILE PATTERN: the pid in PIDFILE runs and its command line
# contains PATTERN.
pid_alive() {
	local pid
	[ -f "$1" ] || return 1
	pid=$(cat "$1" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2"
}

# stop_pid NAME PIDFILE PATTERN [SECONDS]: SIGTERM, wait up to SECONDS
# (default 30), then SIGKILL; removes PIDFILE.
stop_pid() {
	local pid
	if ! pid_alive "$2" "$3"; then
		rm -f "$2"
		say "$1" "stopped"
		return 0
	fi
	pid=$(cat "$2")
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 $((${4:-30} * 10))); do
		[ -d "/proc/$pid" ] || break
		sleep 0.1
	done
	if [ -d "/proc/$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
	rm -f "$2"
	say "$1" "stopped"
}
