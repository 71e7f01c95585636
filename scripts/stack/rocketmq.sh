# shellcheck shell=bash
# rocketmq.sh — Apache RocketMQ on the jars of deploy/rocketmq/pom.xml.
# Service rocketmq: a name server and a broker (on its port, the one two below
# and the one above; configured by deploy/rocketmq/*.conf) with the topic
# ORDER_EVENTS. The broker announces ORDERFLOW_BROKER_IP: another loopback
# address lets a TCP proxy there cut it off (make chaos). Service proxy:
# proxy.sh. Profile ha (ORDERFLOW_ROCKETMQ_PROFILE=ha): rocketmq-ha.sh.

NAMESRV_PORT=${ORDERFLOW_NAMESRV_PORT:-9876}
BROKER_PORT=${ORDERFLOW_BROKER_PORT:-10911}
BROKER_IP=${ORDERFLOW_BROKER_IP:-127.0.0.1}
ROCKETMQ_PROFILE=${ORDERFLOW_ROCKETMQ_PROFILE:-single}
TOPIC=ORDER_EVENTS
MQADMIN_LOG=$LOGS/rocketmq-admin.log
pom_property() { sed -n "s:.*<$1>\(.*\)</$1>.*:\1:p" "$ROOT/$2"; }
ROCKETMQ_JARS=$CACHE/rocketmq-$(pom_property rocketmq.version deploy/rocketmq/pom.xml)
# What the profiles differ in, which rocketmq-ha.sh redefines. The topic is
# MIXED, so that RocketMQ 5 clients may send normal, FIFO, delayed and
# transactional messages to it (they check its type before they send).
RMQ=rocketmq
BROKER_IDS=(0)
TOPIC_TYPE=MIXED
broker_name() { echo broker; }
broker_home() { echo "$DATA/$RMQ"; }
# profile_conf namesrv|broker|ports: the profile's lines of a configuration,
# or the further ports of its name server.
profile_conf() { :; }
brokers_ready() { broker_registered 0; }
master_port() { echo "$BROKER_PORT"; }
rocketmq_external() {
	port_open "$NAMESRV_PORT" && port_open "$BROKER_PORT" && broker_registered 0 &&
		mqadmin topicRoute -n "127.0.0.1:$NAMESRV_PORT" -t "$TOPIC" 2>>"$MQADMIN_LOG" | grep -q "$BROKER_IP:$BROKER_PORT"
}
rocketmq_healthy() { say rocketmq "healthy: name server 127.0.0.1:$NAMESRV_PORT, broker 127.0.0.1:$BROKER_PORT, topic $TOPIC (message.type=MIXED)"; }
if [ "$ROCKETMQ_PROFILE" = ha ]; then
	. "$ROOT/scripts/stack/rocketmq-ha.sh"
elif [ "$ROCKETMQ_PROFILE" != single ]; then
	usage_error "unknown RocketMQ profile '$ROCKETMQ_PROFILE' (known: single, ha)"
fi
NAMESRV_PID=$DATA/$RMQ/namesrv.pid
NAMESRV_LOG=$LOGS/$RMQ-namesrv.log
# rocketmq_fetch NAME JARS POM: Java 17, and POM's jars in the cache.
rocketmq_fetch() {
	local v
	v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1) || true
	[ "${v:-0}" -ge 17 ] || fail "$1" "RocketMQ needs Java 17 or newer, found ${v:-none}; install openjdk-17-jre-headless and put it first on PATH"
	into_cache "$1" "$2" "the ${2##*/} jars from Maven Central" maven_jars "$ROOT/$3"
}

# rmq_java JARS USER_HOME HEAP MAIN ARGS...: sets RMQ_CMD to a RocketMQ JVM
# on the jars in JARS, writing RocketMQ's own logs (and store) under USER_HOME.
rmq_java() {
	# shellcheck disable=SC2206 # HEAP is several options
	RMQ_CMD=(env "ROCKETMQ_HOME=$1" java $3 -XX:+UseG1GC -XX:-OmitStackTraceInFastThrow --add-opens java.base/java.lang=ALL-UNNAMED \
		--add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED --add-opens java.base/java.util=ALL-UNNAMED \
		--add-exports java.base/jdk.internal.ref=ALL-UNNAMED "-Duser.home=$2" "-Drocketmq.home.dir=$1" -cp "$1/lib/*" "${@:4}")
}
mqadmin() {
	rmq_java "$ROCKETMQ_JARS" "$DATA/$RMQ" "-Xms64m -Xmx128m -XX:TieredStopAtLevel=1" org.apache.rocketmq.tools.command.MQAdminStartup "$@"
	"${RMQ_CMD[@]}"
}
namesrv_running() { pid_alive "$NAMESRV_PID" NamesrvStartup; }
namesrv_healthy() { port_open "$NAMESRV_PORT"; }
namesrv_start() {
	# shellcheck disable=SC2046 # one port a word
	require_free_port namesrv "$NAMESRV_PORT" $(profile_conf ports)
	say namesrv "starting on 127.0.0.1:$NAMESRV_PORT"
	{
		cat "$ROOT/deploy/rocketmq/namesrv.conf"
		printf '\n%s\n' "# Added by scripts/stack/rocketmq.sh." "listenPort=$NAMESRV_PORT"
		profile_conf namesrv
	} >"$DATA/$RMQ/namesrv.conf"
	rmq_java "$ROCKETMQ_JARS" "$DATA/$RMQ" "-Xms128m -Xmx256m -XX:MaxDirectMemorySize=128m" org.apache.rocketmq.namesrv.NamesrvStartup -c "$DATA/$RMQ/namesrv.conf"
	spawn "$NAMESRV_PID" "$NAMESRV_LOG" "${RMQ_CMD[@]}"
	STARTED=1
}
broker_port() { echo $((BROKER_PORT + 10 * $1)); }
broker_pid() { echo "$DATA/$RMQ/$(broker_name "$1").pid"; }
broker_log() { echo "$LOGS/$RMQ-$(broker_name "$1").log"; }
broker_running() { pid_alive "$(broker_pid "$1")" BrokerStartup; }
broker_healthy() { port_open "$(broker_port "$1")"; }
broker_registered() { mqadmin clusterList -n "127.0.0.1:$NAMESRV_PORT" 2>>"$MQADMIN_LOG" | grep -q "$BROKER_IP:$(broker_port "$1")"; }
broker_start() {
	local port home
	port=$(broker_port "$1")
	home=$(broker_home "$1")
	require_free_port "$(broker_name "$1")" "$port" $((port - 2)) $((port + 1))
	mkdir -p "$home/store"
	{
		cat "$ROOT/deploy/rocketmq/broker.conf"
		echo
		profile_conf broker
		echo "# Added by scripts/stack/rocketmq.sh: store inside the data folder, ports."
		printf '%s\n' "storePathRootDir=$home/store" "storePathCommitLog=$home/store/commitlog" "namesrvAddr=127.0.0.1:$NAMESRV_PORT" \
			"listenPort=$port" "brokerIP1=$BROKER_IP"
	} >"$home/broker.conf"
	say "$(broker_name "$1")" "starting on 127.0.0.1:$port"
	rmq_java "$ROCKETMQ_JARS" "$home" "-Xms256m -Xmx512m -XX:MaxDirectMemorySize=256m" org.apache.rocketmq.broker.BrokerStartup -c "$home/broker.conf"
	spawn "$(broker_pid "$1")" "$(broker_log "$1")" "${RMQ_CMD[@]}"
	STARTED=1
}

# topic_ready: every broker's topic table has ORDER_EVENTS, of TOPIC_TYPE if
# the profile has one (the keys are sorted: attributes before writeQueueNums).
topic_ready() {
	local i
	for i in "${BROKER_IDS[@]}"; do
		awk -v start="\"$TOPIC\":{" -v type="$TOPIC_TYPE" '
			index($0, start) { inside = 1; found = (type == "") }
			inside && index($0, "\"message.type\":\"" type "\"") { found = 1 }
			inside && /"writeQueueNums"/ { exit }
			END { exit !found }' "$(broker_home "$i")/store/config/topics.json" 2>/dev/null || return 1
	done
}

rocketmq_up() {
	local i
	rocketmq_fetch rocketmq "$ROCKETMQ_JARS" deploy/rocketmq/pom.xml
	mkdir -p "$DATA/$RMQ"
	if ! namesrv_running && ! broker_running 0 && rocketmq_external; then
		external rocketmq "RocketMQ name server 127.0.0.1:$NAMESRV_PORT and broker 127.0.0.1:$BROKER_PORT with topic $TOPIC"
		return 0
	fi
	STARTED=0
	up_service namesrv "$NAMESRV_LOG" "127.0.0.1:$NAMESRV_PORT" namesrv
	for i in "${BROKER_IDS[@]}"; do up_service "$(broker_name "$i")" "$(broker_log "$i")" "127.0.0.1:$(broker_port "$i")" broker "$i"; done
	# The admin tool takes a JVM start of seconds: asked only after a start.
	if [ "$STARTED" = 1 ] || ! topic_ready; then
		say rocketmq "waiting for registration with the name server"
		wait_until "$HEALTH_TIMEOUT" brokers_ready ||
			fail rocketmq "the brokers did not register with the name server 127.0.0.1:$NAMESRV_PORT within ${HEALTH_TIMEOUT}s" "$(broker_log 0)"
	fi
	if ! topic_ready; then
		say rocketmq "creating topic $TOPIC with 8 queues${TOPIC_TYPE:+ (message.type=$TOPIC_TYPE)}"
		mqadmin updateTopic -n "127.0.0.1:$NAMESRV_PORT" -b "127.0.0.1:$(master_port)" -t "$TOPIC" -r 8 -w 8 \
			${TOPIC_TYPE:+-a "+message.type=$TOPIC_TYPE"} >>"$MQADMIN_LOG" 2>&1 || fail rocketmq "could not create topic $TOPIC" "$MQADMIN_LOG"
		# A replica copies its master's topics within seconds.
		wait_until "$HEALTH_TIMEOUT" topic_ready ||
			fail rocketmq "topic $TOPIC missing, or not of message.type ${TOPIC_TYPE:-NORMAL}, after creation" "$MQADMIN_LOG"
	fi
	rocketmq_healthy
}

rocketmq_down() {
	local i
	for i in "${BROKER_IDS[@]}"; do stop_pid "$(broker_name "$i")" "$(broker_pid "$i")" BrokerStartup; done
	stop_pid namesrv "$NAMESRV_PID" NamesrvStartup
}
rocketmq_status() {
	local rc=0 i
	show namesrv "$NAMESRV_PID" NamesrvStartup "$NAMESRV_PORT" "$NAMESRV_LOG" "127.0.0.1:$NAMESRV_PORT" || rc=1
	for i in "${BROKER_IDS[@]}"; do
		show "$(broker_name "$i")" "$(broker_pid "$i")" BrokerStartup "$(broker_port "$i")" \
			"$(broker_log "$i") (details: $(broker_home "$i")/logs/rocketmqlogs)" "127.0.0.1:$(broker_port "$i")" || rc=1
	done
	return "$rc"
}
