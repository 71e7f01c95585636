# orderflow — see README.md. The local stack logic lives in scripts/stack.sh.

GO ?= go
GOTEST_FLAGS ?= -race -p 2 -timeout 20m

.PHONY: up down status test vet demo

## up: start PostgreSQL, Temporal (UI on :8233) and RocketMQ if not running
up:
	@scripts/stack.sh up

## demo: start the stack, run the worker and the bridge, publish a demo
## scenario and check the invariants; leaves everything running (make down stops it)
demo: up
	@scripts/demo.sh

## down: stop the local stack, keeping its data in .data/
down:
	@scripts/stack.sh down

## status: print each service's state
status:
	@scripts/stack.sh status

vet:
	$(GO) vet ./...

## test: bring the stack up, then vet and run every test against it
test: up
	$(GO) vet ./...
	$(GO) test $(GOTEST_FLAGS) ./...
