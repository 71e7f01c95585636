# shellcheck shell=bash
# proxy.sh — the RocketMQ 5 proxy, for gRPC clients (orderflow does not use
# it; the interop tests' Java clients do), on all interfaces, in front of
# rocketmq.sh's name server; and those clients' jars, which an `up` of every
# service fetches.

PROXY_PORT=${ORDERFLOW_PROXY_PORT:-8081}
PROXY_REMOTING_PORT=${ORDERFLOW_PROXY_REMOTING_PORT:-8080}
PROXY_JARS=$CACHE/rocketmq-proxy-$(pom_property rocketmq.version deploy/rocketmq/proxy/pom.xml)
CLIENTS_JARS=$CACHE/rocketmq-client-java-$(pom_property rocketmq-client-java.version interop/java/pom.xml)
PROXY_DIR=$DATA/$RMQ/proxy
PROXY_LOG=$LOGS/$RMQ-proxy.log

proxy_running() { pid_alive "$PROXY_DIR/proxy.pid" ProxyStartup; }
proxy_healthy() { port_open "$PROXY_PORT"; }
# proxy_external: the port is another clone's RocketMQ proxy.
proxy_external() {
	local pid
	pid=$(port_pid "$PROXY_PORT")
	[ -n "$pid" ] && grep -qa ProxyStartup "/proc/$pid/cmdline" 2>/dev/null
}
proxy_start() {
	port_open "$NAMESRV_PORT" || fail proxy "the name server 127.0.0.1:$NAMESRV_PORT is not running; start it first: scripts/stack.sh up rocketmq proxy"
	require_free_port proxy "$PROXY_PORT" "$PROXY_REMOTING_PORT"
	echo "{\"rocketMQClusterName\": \"DefaultCluster\", \"namesrvAddr\": \"127.0.0.1:$NAMESRV_PORT\", \"proxyMode\": \"cluster\"," \
		"\"grpcServerPort\": $PROXY_PORT, \"remotingListenPort\": $PROXY_REMOTING_PORT, \"enablePrintJstack\": false}" >"$PROXY_DIR/rmq-proxy.json"
	say proxy "starting on port $PROXY_PORT (gRPC) and $PROXY_REMOTING_PORT (remoting)"
	rmq_java "$PROXY_JARS" "$PROXY_DIR" "-Xms64m -Xmx192m -XX:MaxDirectMemorySize=64m" org.apache.rocketmq.proxy.ProxyStartup -pc "$PROXY_DIR/rmq-proxy.json" -pm cluster
	spawn "$PROXY_DIR/proxy.pid" "$PROXY_LOG" "${RMQ_CMD[@]}"
}

proxy_up() {
	rocketmq_fetch proxy "$PROXY_JARS" deploy/rocketmq/proxy/pom.xml
	mkdir -p "$PROXY_DIR"
	up_service proxy "$PROXY_LOG" "port $PROXY_PORT" proxy
	proxy_running || return 0
	say proxy "healthy: gRPC endpoint 127.0.0.1:$PROXY_PORT, name server 127.0.0.1:$NAMESRV_PORT"
}
proxy_down() { stop_pid proxy "$PROXY_DIR/proxy.pid" ProxyStartup; }
proxy_status() {
	show proxy "$PROXY_DIR/proxy.pid" ProxyStartup "$PROXY_PORT" "$PROXY_LOG (details: $PROXY_DIR/logs/rocketmqlogs)" \
		"127.0.0.1:$PROXY_PORT (gRPC), $PROXY_REMOTING_PORT (remoting)"
}

clients_fetch() { into_cache clients "$CLIENTS_JARS" "the ${CLIENTS_JARS##*/} jars from Maven Central" maven_jars "$ROOT/interop/java/pom.xml"; }
