#!/usr/bin/env bash
# Starts a throwaway ClickHouse on loopback with its data in a temporary
# folder and prints the DSN tests should use. Used by .ci/run.
set -euo pipefail
dir=$(mktemp -d /tmp/herald-ch-XXXXXX)
mkdir -p "$dir/tmp" "$dir/uf" "$dir/fs"
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=19000
while in_use "$port" || in_use $((port + 1)) || in_use $((port + 2)); do port=$((port + 10)); done
cat > "$dir/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$dir/ch.log</log><errorlog>$dir/ch.err</errorlog></logger>
  <tcp_port>$port</tcp_port>
  <http_port>$((port + 1))</http_port>
  <interserver_http_port>$((port + 2))</interserver_http_port>
  <listen_host>127.0.0.1</listen_host>
  <path>$dir/</path>
  <tmp_path>$dir/tmp/</tmp_path>
  <user_files_path>$dir/uf/</user_files_path>
  <format_schema_path>$dir/fs/</format_schema_path>
  <users_config>/etc/clickhouse-server/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
</yandex>
XML
clickhouse-server --config-file="$dir/config.xml" >"$dir/stdout" 2>&1 &
echo $! > "$dir/pid"
for _ in $(seq 1 120); do
  if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then break; fi
  if clickhouse-client --port "$port" --query "SELECT 1" >/dev/null 2>&1; then
    echo "clickhouse://127.0.0.1:$port/"
    exit 0
  fi
  sleep 0.5
done
echo "ClickHouse did not start; log:" >&2
tail -30 "$dir/ch.err" "$dir/stdout" >&2 || true
exit 1
