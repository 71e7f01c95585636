# shellcheck shell=bash
# redis.sh — Redis, the bridges' shared duplicate filter, without a password.
# A cache in front of the ledger (order_events): losing keys costs a signal
# each, never correctness. So nothing is persisted, and past
# ORDERFLOW_REDIS_MAXMEMORY the least recently used keys go (all have a TTL).

REDIS_PORT=${ORDERFLOW_REDIS_PORT:-6379}
REDIS_MAXMEMORY=${ORDERFLOW_REDIS_MAXMEMORY:-256mb}
REDIS_PID=$DATA/redis/redis.pid
REDIS_LOG=$LOGS/redis.log

redis_bin() { PATH=$PATH:/usr/sbin command -v redis-server; }

redis_running() { pid_alive "$REDIS_PID" redis-server; }
redis_external() { port_open "$REDIS_PORT" && redis_healthy; }

# redis_healthy: the port answers PING with PONG.
redis_healthy() {
	local reply
	reply=$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$REDIS_PORT && printf 'PING\r\n' >&3 && head -n1 <&3" 2>/dev/null) || return 1
	[ "${reply%$'\r'}" = "+PONG" ]
}

redis_start() {
	require_free_port redis "$REDIS_PORT"
	say redis "starting on 127.0.0.1:$REDIS_PORT"
	spawn "$REDIS_PID" "$REDIS_LOG" "$(redis_bin)" --bind 127.0.0.1 --port "$REDIS_PORT" --protected-mode yes --daemonize no \
		--logfile "" --loglevel warning --dir "$DATA/redis" --save "" --appendonly no \
		--maxmemory "$REDIS_MAXMEMORY" --maxmemory-policy volatile-lru
}

redis_up() {
	redis_bin >/dev/null || apt_install redis redis-server
	redis_bin >/dev/null || fail redis "redis-server still missing after install" "$LOGS/redis-install.log"
	mkdir -p "$DATA/redis"
	up_service redis "$REDIS_LOG" "127.0.0.1:$REDIS_PORT" redis
	redis_running || return 0
	say redis "healthy: redis://127.0.0.1:$REDIS_PORT/0"
}

redis_down() { stop_pid redis "$REDIS_PID" redis-server; }
redis_status() { show redis "$REDIS_PID" redis-server "$REDIS_PORT" "$REDIS_LOG" "127.0.0.1:$REDIS_PORT"; }
