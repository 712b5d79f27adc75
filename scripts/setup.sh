#!/usr/bin/env bash
# Installs from Debian's packages what Herald needs and is missing.
#   scripts/setup.sh         what the demo uses: ClickHouse (cost accounting)
#                            and protoc (wire contracts); the demo runs without
#                            them, so a machine that cannot install only warns.
#   scripts/setup.sh --test  also what `make test` uses: Chromium (dashboard
#                            test), Bubblewrap (the terminal tool's sandbox),
#                            tmux, Python 3, and Node.js with npm (an MCP
#                            server from npm); fails when it cannot install them.
# Installing needs root or sudo; nothing is installed when nothing is missing.
set -euo pipefail
mode=${1:-demo}
need=()
want() { command -v "$1" >/dev/null 2>&1 || need+=("${@:2}"); }
want clickhouse-server clickhouse-server clickhouse-client
want clickhouse-client clickhouse-client
want protoc protobuf-compiler
if [ "$mode" = "--test" ]; then
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
  want bwrap bubblewrap
  want tmux tmux
  want python3 python3
  want node nodejs
  want npm npm
fi
# The sandbox's bwrap runs unprivileged (as sandbox.uid under a root
# runner): where AppArmor restricts unprivileged user namespaces (Ubuntu
# 23.10 and later) the tests need them allowed.
if [ "$mode" = "--test" ] && [ "$(cat /proc/sys/kernel/apparmor_restrict_unprivileged_userns 2>/dev/null)" = 1 ]; then
  echo "setup: allowing unprivileged user namespaces for bwrap (sysctl kernel.apparmor_restrict_unprivileged_userns=0)" >&2
  if [ "$(id -u)" -eq 0 ]; then sysctl -qw kernel.apparmor_restrict_unprivileged_userns=0; else sudo sysctl -qw kernel.apparmor_restrict_unprivileged_userns=0; fi
fi
[ ${#need[@]} -eq 0 ] && exit 0
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)

cannot() {
  if [ "$mode" = "--test" ]; then
    echo "setup: the tests need ${need[*]}; please install them ($1)" >&2
    exit 1
  fi
  echo "setup: please install ${need[*]} ($1); the demo runs without ClickHouse but cannot show costs" >&2
  exit 0
}
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || cannot "not root and no sudo here"
  sudo="sudo"
fi
command -v apt-get >/dev/null 2>&1 || cannot "no apt-get here"
echo "setup: installing ${need[*]} from Debian's packages" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
