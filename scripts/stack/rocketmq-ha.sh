# shellcheck shell=bash
# rocketmq-ha.sh — the replicated RocketMQ profile (ORDERFLOW_ROCKETMQ_PROFILE=ha,
# make up ROCKETMQ=ha; the failover test of make chaos runs it): a broker
# group of two brokers in controller mode, on the broker port and the broker
# port + 10, which elect their master themselves and replicate synchronously
# (deploy/rocketmq/broker-ha.conf). The controller runs inside the name
# server, on ORDERFLOW_CONTROLLER_PORT (9878), for the brokers and its Raft
# peers. Sourced by rocketmq.sh, whose profile hooks it redefines; data in
# <data>/rocketmq-ha.
#
# The topic has no message type (NORMAL): with RocketMQ 5.3.3 a replica
# fails to copy its master's topics as soon as one has an attribute ("only
# add attribute is supported while creating topic", apache/rocketmq#9403,
# fixed after 5.3.3), so RocketMQ 5 clients send only normal messages to it.

CONTROLLER_PORT=${ORDERFLOW_CONTROLLER_PORT:-9878}
RMQ=rocketmq-ha
# shellcheck disable=SC2034 # read by rocketmq.sh
BROKER_IDS=(0 1) TOPIC_TYPE=

broker_name() { echo "broker-$1"; }
broker_home() { echo "$DATA/$RMQ/broker-$1"; }

profile_conf() {
	case $1 in
	ports) echo "$CONTROLLER_PORT" ;;
	namesrv)
		echo "# The controller (broker master election) inside the name server."
		printf '%s\n' enableControllerInNamesrv=true controllerDLegerGroup=orderflow \
			"controllerDLegerPeers=n0-127.0.0.1:$CONTROLLER_PORT" controllerDLegerSelfId=n0 \
			"controllerStorePath=$DATA/$RMQ/controller" enableElectUncleanMaster=false notifyBrokerRoleChanged=true
		;;
	broker)
		cat "$ROOT/deploy/rocketmq/broker-ha.conf"
		printf '\n%s\n' "controllerAddr=127.0.0.1:$CONTROLLER_PORT"
		;;
	esac
}

cluster_list() { mqadmin clusterList -n "127.0.0.1:$NAMESRV_PORT" 2>>"$MQADMIN_LOG"; }

# master_port: the port of the broker the controller elected master (the
# name server lists it with broker ID 0).
master_port() { cluster_list | awk -v ip="$BROKER_IP" '$3 == "0" { split($4, a, ":"); if (a[1] == ip) { print a[2]; exit } }'; }

# brokers_ready: both brokers registered, one of them as master.
brokers_ready() {
	local list
	list=$(cluster_list) || return 1
	grep -q "$BROKER_IP:$(broker_port 0)" <<<"$list" && grep -q "$BROKER_IP:$(broker_port 1)" <<<"$list" &&
		awk '$3 == "0" { found = 1 } END { exit !found }' <<<"$list"
}

rocketmq_external() { return 1; }

rocketmq_healthy() {
	say rocketmq "healthy: name server and controller 127.0.0.1:$NAMESRV_PORT, brokers 127.0.0.1:$(broker_port 0) and 127.0.0.1:$(broker_port 1) (master 127.0.0.1:$(master_port)), topic $TOPIC (message.type NORMAL: RocketMQ 5 clients send only normal messages to it)"
}
