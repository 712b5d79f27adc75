#!/bin/sh
# A pre_tool_call policy plugin: refuse terminal commands that use curl.
#   nats --server "$NATS_URL" reply herald.hooks.pre_tool_call --command ./no-curl.sh
# nats runs this once per request, with the request in NATS_REQUEST_BODY.
if printf '%s' "$NATS_REQUEST_BODY" | grep -q '"tool":"terminal".*curl'; then
  echo '{"allow": false, "reason": "policy: no curl from agents; ask the user to fetch it"}'
else
  echo '{"allow": true}'
fi
