#!/usr/bin/env bash
# Runs every benchmark whose figures are in docs/BENCHMARKS.md. Each pairs
# Herald's figure with a baseline measured in the same run.
# Needs HERALD_TEST_CLICKHOUSE_DSN or clickhouse-server on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
run() { echo "== $*"; go test -run '^$' "$@" 2>&1 | grep -E '^(Benchmark|ok|FAIL|---)' ; }
# issue 14's aims: CPU and bytes per step, step overhead, many sessions at 200 ms
run -bench 'BenchmarkStepCPU' -benchtime 30x ./services/herald/e2e/   # and BenchmarkStepCPUProcess (herald up)
run -bench 'BenchmarkUpProcessors' -benchtime 20x ./services/herald/e2e/   # processors sized to the load, against GOMAXPROCS fixed
run -bench 'BenchmarkWorkQueueCycle' -benchtime 2000x ./pkg/bus/
run -bench 'BenchmarkStateForNextTransition' ./services/loop/
run -bench 'BenchmarkStepBytes' -benchtime 1x ./services/herald/e2e/
run -bench 'BenchmarkStepOverhead' -benchtime 20x ./services/herald/e2e/   # and BenchmarkStepOverheadProcess (herald up, outside-in)
run -bench 'BenchmarkStepThroughBus|BenchmarkStepInProcess' -benchtime 30x ./services/herald/e2e/
run -bench 'BenchmarkConcurrentSessions' -benchtime 1x -timeout 30m ./services/herald/e2e/   # and BenchmarkConcurrentSessionsProcess (each side its own process)
run -bench 'BenchmarkUpDefaults' -benchtime 5x -timeout 30m ./services/herald/e2e/   # issue 29: herald up with no flag, 200x5 at 200 ms and 1000x3 at 2 s, five bursts each
run -bench 'BenchmarkSustainedLoad' -benchtime 1x -timeout 30m ./services/herald/e2e/
run -bench 'BenchmarkFairShare' -benchtime 1x -count 3 -timeout 30m ./services/herald/e2e/   # issue 29: a flood beside alone and first come first served, three runs; weights
run -bench 'BenchmarkGatewayAddedLatency' ./services/gateway/
run -bench 'BenchmarkRunnersScaleOut' -benchtime 1x -timeout 20m ./services/toolrunner/
run -bench 'BenchmarkFileTools' -count 5 ./services/toolrunner/   # confined file access per call (issue 26)
run -bench . ./services/memory/ ./services/compressor/
run -bench . -benchtime 1x -timeout 30m ./services/accounting/
# the HTTP api beside a task on NATS (issue 31): per turn, time to first token streamed, turns/s with 16 clients
run -bench 'BenchmarkTurn|BenchmarkFirstToken' -benchtime 300x ./services/api/
run -bench 'BenchmarkSustained' -benchtime 800x ./services/api/
