#!/usr/bin/env bash
# Installs from Debian's packages what Herald needs and is missing.
#   scripts/setup.sh         what `herald demo` starts (make demo): Bubblewrap
#                            (the tool runner's sandbox; the demo cannot run
#                            without it, so a machine that cannot install it
#                            fails) and ClickHouse (cost accounting; the demo
#                            runs without it, so that one only warns).
#   scripts/setup.sh --test  also what `make test` uses: protoc (wire
#                            contracts), Chromium (dashboard test), tmux,
#                            Python 3, and Node.js with npm (an MCP server from
#                            npm); fails when it cannot install them.
# Installing needs root or sudo; nothing is installed when nothing is missing.
set -euo pipefail
mode=${1:-demo}
need=()     # packages to install
blocking=() # of them, those this mode cannot do without
# want PROGRAM required|optional PACKAGE...: install PACKAGE... unless PROGRAM is on PATH.
want() {
  command -v "$1" >/dev/null 2>&1 && return 0
  need+=("${@:3}")
  [ "$2" = required ] && blocking+=("${@:3}")
  return 0
}
# The demo's list: every program `herald demo` starts (a test,
# TestSetupInstallsWhatTheDemoStarts in services/herald, compares the two).
want bwrap required bubblewrap
want clickhouse-server optional clickhouse-server
if [ "$mode" = "--test" ]; then
  want clickhouse-client required clickhouse-client
  want protoc required protobuf-compiler
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { need+=(chromium); blocking+=(chromium); }
  want tmux required tmux
  want python3 required python3
  want node required nodejs
  want npm required npm
  [ ${#need[@]} -gt 0 ] && blocking=("${need[@]}")
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
  if [ ${#blocking[@]} -gt 0 ]; then
    if [ "$mode" = "--test" ]; then
      echo "setup: the tests need ${need[*]}; please install them ($1)" >&2
    else
      echo "setup: the demo needs ${blocking[*]} (and uses ${need[*]}); please install them ($1)" >&2
    fi
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
