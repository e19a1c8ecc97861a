#!/usr/bin/env bash
# Chat Completions and Responses with nothing but curl; both stream.
#   OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_API_KEY=sim-SEARCH_APP_KEY bash examples/curl/chat.sh
set -euo pipefail
: "${OPENAI_BASE_URL:=http://127.0.0.1:8080/v1}" "${OPENAI_API_KEY:?set OPENAI_API_KEY to a modelgate key}"

echo "== chat completions"
curl -sSfN "$OPENAI_BASE_URL/chat/completions" \
  -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' \
  -d '{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Say hello to modelgate."}]}'

echo "== responses"
curl -sSfN "$OPENAI_BASE_URL/responses" \
  -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' \
  -d '{"model":"gpt-4o-mini","stream":true,"input":"Say hello to modelgate."}'
