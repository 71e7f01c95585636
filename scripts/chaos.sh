#!/usr/bin/env bash
# chaos.sh — the fault matrix (`make chaos`): every fault the invariants name
# (SIGKILL of the worker, of bridges, of Temporal, the broker, the name
# server and the PostgreSQL postmaster; network cuts of each dependency),
# one case after another, each ending with all five invariants checked.
#
# It runs on a stack of its own, beside the one `make up` starts: data in
# <data>/chaos, PostgreSQL on 15432, Temporal on 17233 (UI 18233), the name
# server on 19876 and the broker listening on 127.0.0.1:20911 while it
# announces 127.0.0.2:20911, where the test keeps a TCP proxy that it can cut,
# and Redis (the bridges' duplicate filter) on 16379.
# Killing these services disturbs no other test. Beside it runs the
# replicated broker profile (ORDERFLOW_ROCKETMQ_PROFILE=ha: the name server
# with the controller on 29876/29878, brokers on 30911 and 30921) for the
# failover test. The stacks are stopped
# (its data kept) when the run ends; ORDERFLOW_CHAOS_KEEP=1 leaves it up.
#
# Extra arguments go to `go test` (for example -run 'TestFaultMatrix/broker').
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

export ORDERFLOW_DATA=${ORDERFLOW_CHAOS_DATA:-$ROOT/.data/chaos}
export ORDERFLOW_PG_PORT=15432
export ORDERFLOW_TEMPORAL_PORT=17233
export ORDERFLOW_TEMPORAL_UI_PORT=18233
export ORDERFLOW_NAMESRV_PORT=19876
export ORDERFLOW_BROKER_PORT=20911
export ORDERFLOW_BROKER_IP=127.0.0.2
export ORDERFLOW_REDIS_PORT=16379

# What the tests and the processes under test connect to.
export DATABASE_URL="postgres://orderflow:orderflow@127.0.0.1:$ORDERFLOW_PG_PORT/orderflow?sslmode=disable"
export TEMPORAL_ADDRESS="127.0.0.1:$ORDERFLOW_TEMPORAL_PORT"
export ROCKETMQ_NAMESRV="127.0.0.1:$ORDERFLOW_NAMESRV_PORT"
export ROCKETMQ_BROKER="127.0.0.1:$ORDERFLOW_BROKER_PORT"
export REDIS_URL="redis://127.0.0.1:$ORDERFLOW_REDIS_PORT/0"
export ORDERFLOW_CHAOS_BROKER_ANNOUNCED="$ORDERFLOW_BROKER_IP:$ORDERFLOW_BROKER_PORT"

# The replicated profile, for the failover test.
export ORDERFLOW_CHAOS_HA_NAMESRV_PORT=29876
export ORDERFLOW_CHAOS_HA_CONTROLLER_PORT=29878
export ORDERFLOW_CHAOS_HA_BROKER_PORT=30911
ha_stack() {
	ORDERFLOW_ROCKETMQ_PROFILE=ha ORDERFLOW_NAMESRV_PORT=$ORDERFLOW_CHAOS_HA_NAMESRV_PORT \
		ORDERFLOW_CONTROLLER_PORT=$ORDERFLOW_CHAOS_HA_CONTROLLER_PORT \
		ORDERFLOW_BROKER_PORT=$ORDERFLOW_CHAOS_HA_BROKER_PORT ORDERFLOW_BROKER_IP=127.0.0.1 \
		scripts/stack.sh "$@"
}

stop_stack() {
	if [ "${ORDERFLOW_CHAOS_KEEP:-}" != 1 ]; then
		ha_stack down rocketmq >/dev/null || true
		scripts/stack.sh down redis rocketmq temporal postgres >/dev/null || true
	fi
}
trap stop_stack EXIT

echo "chaos: starting the fault matrix's own stack (data $ORDERFLOW_DATA)"
# Not the RocketMQ proxy: no fault of the matrix involves it.
scripts/stack.sh up postgres temporal rocketmq redis
echo "chaos: starting the replicated broker profile"
ha_stack up rocketmq

status=0
${GO:-go} test -tags chaos -count=1 -timeout 60m -v -run '^(TestFaultMatrix|TestBrokerFailover)$' "$@" ./e2e 2>&1 | tee "$ORDERFLOW_DATA/logs/chaos-test.log" || status=$?
echo
echo "chaos: the matrix (also in $ORDERFLOW_DATA/logs/chaos-test.log):"
sed -n '/fault matrix:/,/^[^ |]/p' "$ORDERFLOW_DATA/logs/chaos-test.log" | grep '|' || true
exit "$status"
