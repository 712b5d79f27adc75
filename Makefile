# Herald — the two commands a newcomer needs are `make demo` and `make test`.
GO        ?= go
BIN       := bin/herald
MODULES   := ./pkg/... ./proto/... ./services/loop/... ./services/gateway/... ./services/toolrunner/... \
             ./services/compressor/... ./services/memory/... ./services/accounting/... ./services/herald/... ./services/api/...
PROTOC_GEN_GO_VERSION := v1.36.12
TEST_TIMEOUT ?= 30m

.PHONY: all build demo test bench chaos proto proto-check vet fmt clean setup

all: build

build:
	$(GO) build -o $(BIN) ./services/herald

# First command of the README: install what the demo needs, build, run it.
demo: setup build
	./$(BIN) demo

setup:
	./scripts/setup.sh

# Second command of the README: installs what the tests use when it is
# missing (ClickHouse, Chromium, Bubblewrap, protoc, tmux, Python 3), then
# runs every test, race detector on. Without HERALD_TEST_CLICKHOUSE_DSN the
# tests start a private ClickHouse of their own.
test: build
	./scripts/setup.sh --test
	HERALD_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(MODULES)

vet:
	$(GO) vet $(MODULES)

fmt:
	gofmt -w pkg proto services

bench: build
	HERALD_BIN=$(CURDIR)/$(BIN) ./scripts/bench.sh

# Fault injection: random kill -9 of any service over 200 sessions (CI runs 24).
chaos: build
	HERALD_BIN=$(CURDIR)/$(BIN) HERALD_CHAOS_SESSIONS=$${HERALD_CHAOS_SESSIONS:-200} $(GO) test -count=1 -v -timeout 60m \
		-run 'TestChaos|TestNATSRestart' ./services/herald/e2e/ 2>&1 | grep -E '^(=== RUN|--- |ok|FAIL|PASS)|chaos:|restart:'

proto:
	./scripts/proto.sh

# Fails when the committed generated code is not what the .proto produces.
proto-check:
	./scripts/proto.sh --check

clean:
	rm -rf bin
