#!/usr/bin/env bash
# stack.sh — the local stack without Docker: PostgreSQL, Temporal (dev server,
# UI), RocketMQ (name server, broker, gRPC proxy) and Redis (duplicate filter).
#
#   scripts/stack.sh up|down|status [service...]   start what is not running and wait
#                       for health | stop, keeping data | print each one's state
#   scripts/stack.sh deps               install missing prerequisites (root, apt-get)
#   scripts/stack.sh mqadmin ARGS...    RocketMQ's admin tool
#
# Services: postgres, temporal, rocketmq, proxy, redis (default: all, and an
# `up` of all fetches the interop tests' Java clients). scripts/stack/ has a
# file per service (install, start, health, stop, ORDERFLOW_* settings), and
# the profiles the benchmark and the fault tests use. Data and logs live in
# ORDERFLOW_DATA (<repo>/.data), downloads in ORDERFLOW_CACHE
# (~/.cache/orderflow); with its own data folder and ports a second stack runs
# beside the first (make chaos). A port another clone's working instance
# serves is used, and left alone.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$ROOT/scripts/stack/lib.sh"
. "$ROOT/scripts/proc.sh"
. "$ROOT/scripts/stack/postgres.sh"
. "$ROOT/scripts/stack/temporal.sh"
. "$ROOT/scripts/stack/rocketmq.sh"
. "$ROOT/scripts/stack/proxy.sh"
. "$ROOT/scripts/stack/redis.sh"

SERVICES_ALL=(postgres temporal rocketmq proxy redis)

main() {
	local cmd=${1:-} all=0 svc rc=0 i
	shift || true
	if [ "$cmd" = mqadmin ]; then mqadmin "$@"; return; fi
	[[ $cmd =~ ^(up|down|status|deps)$ ]] || usage_error "usage: $0 up|down|status [${SERVICES_ALL[*]}] | deps | mqadmin ARGS..."
	if [ "$#" -eq 0 ]; then all=1 && set -- "${SERVICES_ALL[@]}"; fi
	for svc in "$@"; do
		[[ " ${SERVICES_ALL[*]} " == *" $svc "* ]] || usage_error "unknown service '$svc' (known: ${SERVICES_ALL[*]})"
	done
	mkdir -p "$DATA" "$LOGS"
	case $cmd in
	deps) . "$ROOT/scripts/stack/deps.sh" && deps ;;
	up)
		for svc in "$@"; do "${svc}_up"; done
		if [ "$all" = 1 ]; then clients_fetch; fi
		;;
	down)
		# A full `down` first stops the worker and bridge `make demo` left running.
		if [ "$all" = 1 ]; then "$ROOT/scripts/demo.sh" stop; fi
		for ((i = $#; i >= 1; i--)); do "${!i}_down"; done
		;;
	status)
		for svc in "$@"; do "${svc}_status" || rc=1; done
		return "$rc"
		;;
	esac
}

main "$@"
