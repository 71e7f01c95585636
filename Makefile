# orderflow — see README.md. The local stack: scripts/stack.sh, one file per
# service in scripts/stack/; data and logs in .data/, downloaded tools in
# ~/.cache/orderflow.

GO ?= go
# Two packages at a time (the services share the machine), never a cached
# result (the tests depend on the running services), and a timeout long
# enough for the end-to-end and crash tests.
GOTEST_FLAGS ?= -count=1 -p 2 -timeout 30m

# The race detector is on for every package except those whose tests run
# rocketmq-client-go v2.1.2 clients in-process. That client has data races of
# its own, which the detector reports about one run in two and which Go
# cannot suppress: SubscriptionData written by a rebalance while the
# heartbeat copies it (apache/rocketmq-client-go#961, fixed after v2.1.2) and
# the client's closed flag written by Shutdown while a rebalance still sends
# requests (#1115). The pinned version is the newest the module proxy serves.
RACE ?= -race
MQ_MATCH ?= /(internal/mq|internal/smoke|scenario|starter|producer|cmd/orderflow|interop)$$
# internal/mq's own concurrency (callbacks, Stop, lag) runs under the race
# detector with a fake client: these tests use no RocketMQ client.
MQ_RACE_TESTS ?= ^TestConsumer(ConcurrentCallbacksAndStop|LagKeepsTheNewestObservation)$$
# Packages whose tests stop and restart the shared services (crash safety):
# they run alone, after the others, so that they do not pull a service from
# under another package's tests. They run the RocketMQ client too.
SERIAL_MATCH ?= /e2e$$

# staticcheck, pinned and installed into the cache outside the clone (the
# module proxy serves v0.6.1's dependencies; newer releases need an x/exp
# version it does not serve). Its configuration is staticcheck.conf.
STATICCHECK_VERSION ?= v0.6.1
ORDERFLOW_CACHE ?= $(HOME)/.cache/orderflow
STATICCHECK ?= $(ORDERFLOW_CACHE)/tools/staticcheck-$(STATICCHECK_VERSION)

# The RocketMQ profile of the local stack: single (one broker, the default)
# or ha (two brokers in controller mode, synchronous replication); see
# scripts/stack/rocketmq-ha.sh. `make up ROCKETMQ=ha` after a `make down`.
ROCKETMQ ?= $(or $(ORDERFLOW_ROCKETMQ_PROFILE),single)
ROCKETMQ := $(ROCKETMQ)
export ORDERFLOW_ROCKETMQ_PROFILE := $(ROCKETMQ)

# The Temporal profile of the local stack: dev (`temporal server start-dev`,
# the default, for make demo and make test) or server (the Temporal server
# on a PostgreSQL instance of its own, ORDERFLOW_TEMPORAL_SHARDS history
# shards, default 4); see scripts/stack/temporal-server.sh. `make up
# TEMPORAL=server` after a `make down`.
TEMPORAL ?= $(or $(ORDERFLOW_TEMPORAL_PROFILE),dev)
TEMPORAL := $(TEMPORAL)
export ORDERFLOW_TEMPORAL_PROFILE := $(TEMPORAL)

.PHONY: up down status deps test test-short test-bench test-third-party lint vet demo bench chaos doccheck

## up: start PostgreSQL, Temporal (UI on :8233), RocketMQ (with its proxy) and Redis where not running,
## then migrate database orderflow (orderflow migrate: the worker and the bridge only check the schema)
up:
	@scripts/stack.sh up
	@$(GO) run ./cmd/orderflow migrate

## demo: start the stack, run the worker and the bridge, publish a demo
## scenario and check the invariants; leaves everything running (make down stops it)
demo: up
	@scripts/demo.sh

## down: stop the demo's worker and bridge and the local stack, keeping data in .data/
down:
	@if [ -x scripts/demo.sh ]; then scripts/demo.sh stop; fi
	@scripts/stack.sh down

## status: print each service's state (exit status 1 when one is stopped)
status:
	@scripts/stack.sh status

## deps: install missing prerequisites with apt-get (root)
deps:
	@scripts/stack.sh deps

vet:
	$(GO) vet ./...
	$(GO) vet -tags chaos ./e2e
	cd bench && $(GO) vet ./...

$(STATICCHECK):
	@mkdir -p $(dir $(STATICCHECK))
	GOBIN=$(abspath $(dir $(STATICCHECK)))/.staticcheck-build $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(abspath $(dir $(STATICCHECK)))/.staticcheck-build/staticcheck $(STATICCHECK)

## lint: go vet and staticcheck (installed into the cache on first use)
lint: $(STATICCHECK)
	$(GO) vet ./...
	$(GO) vet -tags chaos ./e2e
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags chaos ./e2e
	cd bench && $(GO) vet ./... && $(STATICCHECK) ./...

## chaos: the fault matrix (every SIGKILL and network cut the invariants
## name, each case checked against all five invariants) on a stack of its own
## beside the one `make up` starts; about 15 minutes (scripts/chaos.sh)
chaos:
	@GO=$(GO) scripts/chaos.sh

## doccheck: check the documentation against the code, the reference it is
## generated from, the chart, the compose file, the pinned Temporal CLI and
## the benchmark's results (internal/doccheck; no service needed); make test
## runs it first, make test-short among the unit tests
doccheck:
	$(GO) test -count=1 ./internal/doccheck ./config/internal/docgen

## test-short: the unit tests only, no service needed (about 20 s)
test-short:
	$(GO) test -short -count=1 ./...
	$(MAKE) test-bench
	$(MAKE) test-third-party RACE=

## test-bench: the benchmark's unit tests, a module of its own (bench/) that
## ./... does not reach (no service needed)
test-bench:
	cd bench && $(GO) test -short -count=1 ./...

## test-third-party: the tests of the patched RocketMQ client, a module of
## its own that ./... does not reach (no service needed)
test-third-party:
	cd third_party/rocketmq-client-go && $(GO) test $(RACE) -count=1 ./internal ./internal/remote ./internal/utils ./primitive

## test: install what the tests need (PgBouncer, the JDK: make deps), bring
## the stack up, then vet and run every test against it
test: doccheck deps up lint
	@ORDERFLOW_CACHE=$(ORDERFLOW_CACHE) GO=$(GO) scripts/deploy-check.sh
	$(GO) test $(RACE) $(GOTEST_FLAGS) $$($(GO) list ./... | grep -v -E '$(MQ_MATCH)|$(SERIAL_MATCH)')
	$(GO) test $(GOTEST_FLAGS) $$($(GO) list ./... | grep -E '$(MQ_MATCH)')
	$(GO) test $(RACE) $(GOTEST_FLAGS) -run '$(MQ_RACE_TESTS)' ./internal/mq
	$(GO) test $(GOTEST_FLAGS) $$($(GO) list ./... | grep -E '$(SERIAL_MATCH)')
	$(MAKE) test-bench
	$(MAKE) test-third-party

## fuzz: run every fuzz target of the module for FUZZTIME each (default 1m);
## a failing input is kept in its package's testdata/fuzz/ as a seed that
## make test replays (scripts/fuzz.sh)
FUZZTIME ?= 1m
.PHONY: fuzz
fuzz:
	@FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz.sh

## deploy-check: helm lint and helm template of deploy/helm/orderflow (default,
## production and ci values), validated by kubeconform; helm, kubeconform and
## the Kubernetes schemas come from the module proxy (scripts/deploy-check.sh)
.PHONY: deploy-check
deploy-check:
	@ORDERFLOW_CACHE=$(ORDERFLOW_CACHE) GO=$(GO) scripts/deploy-check.sh

## bench: start the stack, then measure orderflow on two Temporal engines
## (a dev server and the Temporal server on a PostgreSQL of its own, each
## started by the benchmark beside the stack on ports of its own): backlog
## drains of orderflow and of the pipeline floor (a no-op workflow behind the
## same bridge), duplicates, a hot order and a capacity sweep of each, then the
## engine's direct floor (the no-op workflow signalled directly), drained
## and swept; writes bench/results/<date>-<commit>.json; 25 to 30 minutes
## (BENCHMARKS.md)
bench: up
	cd bench && $(GO) run . $(BENCH_FLAGS)
