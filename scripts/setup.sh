#!/usr/bin/env bash
# Installs what Herald's demo and tests use from Debian's packages when it is
# missing: ClickHouse (cost accounting) and protoc (wire contracts).
# Needs root (or sudo) only when something must be installed.
set -euo pipefail
need=()
command -v clickhouse-server >/dev/null || need+=(clickhouse-server clickhouse-client)
command -v protoc >/dev/null || need+=(protobuf-compiler)
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if ! command -v apt-get >/dev/null; then
  echo "setup: please install ${need[*]} (no apt-get here); the demo runs without ClickHouse but cannot show costs" >&2
  exit 0
fi
echo "setup: installing ${need[*]} from Debian's packages" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
