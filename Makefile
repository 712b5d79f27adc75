# Herald — the two commands a newcomer needs are `make demo` and `make test`.
GO        ?= go
BIN       := bin/herald
MODULES   := ./pkg/... ./proto/... ./services/loop/... ./services/gateway/... ./services/toolrunner/... \
             ./services/compressor/... ./services/memory/... ./services/accounting/... ./services/herald/...
PROTOC_GEN_GO_VERSION := v1.36.12
TEST_TIMEOUT ?= 30m

.PHONY: all build demo test test-short bench chaos proto proto-check vet fmt clean setup

all: build

build:
	$(GO) build -o $(BIN) ./services/herald

# First command of the README: install what the demo needs, build, run it.
demo: setup build
	./$(BIN) demo

setup:
	./scripts/setup.sh

# Second command of the README: every test, race detector on.
test: build
	HERALD_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(MODULES)

vet:
	$(GO) vet $(MODULES)

fmt:
	gofmt -w pkg proto services

bench: build
	HERALD_BIN=$(CURDIR)/$(BIN) ./scripts/bench.sh

proto:
	./scripts/proto.sh

# Fails when the committed generated code is not what the .proto produces.
proto-check:
	./scripts/proto.sh --check

clean:
	rm -rf bin
