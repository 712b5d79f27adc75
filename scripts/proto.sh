#!/usr/bin/env bash
# Regenerates proto/heraldpb from proto/herald/v1/*.proto (--check: fail
# when the committed code differs from what the IDL generates).
set -euo pipefail
cd "$(dirname "$0")/.."
version=v1.36.12
bin="$(go env GOPATH)/bin"
if ! "$bin/protoc-gen-go" --version 2>/dev/null | grep -q "${version#v}"; then
  GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$version"
fi
out=proto
if [ "${1:-}" = "--check" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
PATH="$bin:$PATH" protoc --proto_path=proto --go_out="$out" --go_opt=module=github.com/heraldrun/herald/proto proto/herald/v1/*.proto
if [ "${1:-}" = "--check" ]; then
  if ! diff -u proto/heraldpb/herald.pb.go "$out/heraldpb/herald.pb.go" >/dev/null; then
    echo "proto/heraldpb is stale: run 'make proto' and commit the result" >&2
    diff -u proto/heraldpb/herald.pb.go "$out/heraldpb/herald.pb.go" | head -40 >&2
    exit 1
  fi
  echo "proto/heraldpb matches proto/herald/v1"
fi
