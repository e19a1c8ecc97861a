#!/bin/bash
# What a kill and a shutdown cost the spend ledger with many end users (issue 41), on the real
# binary under --simulate with an embedded store:
#
#   bench/cmd/spendkill/run.sh kill 40000   # N end users' calls, SIGKILL 3 s after the load,
#                                        # restart: the team's day spend before and after
#   bench/cmd/spendkill/run.sh term 50000   # N end users' calls, then SIGTERM: time to exit
#
# BIN=path/to/modelgate runs another build (an older one, to compare). Port 18080.
set -euo pipefail
mode=${1:?kill or term}
n=${2:-40000}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
url=http://127.0.0.1:18080
if [ -z "${BIN:-}" ]; then
  (cd "$here/../../.." && go build -o "$work/modelgate" .)
  BIN=$work/modelgate
fi
(cd "$here/../../.." && go build -o "$work/load" ./bench/cmd/spendkill)
cat >"$work/config.yaml" <<YAML
upstream:
  gateway_url: https://gateway.example.com
  base_url: https://platform.example.com
  api_key: \${PLATFORM_API_KEY}
models:
  - id: gpt-4o-mini
    price: {input: 0.15, output: 0.60}
ratelimit:
  data_path: $work/data
teams:
  - name: search
    end_user_limits: {spend_per_day: 1}
    keys:
      - name: app
        key: \${SEARCH_APP_KEY}
admin_keys: [\${MODELGATE_ADMIN_KEY}]
YAML
if curl -sf $url/healthz >/dev/null; then echo "port 18080 is busy" >&2; exit 1; fi
start() {
  "$BIN" --simulate --config "$work/config.yaml" --listen 127.0.0.1:18080 >>"$work/log" 2>&1 &
  pid=$!
  until curl -sf $url/healthz >/dev/null; do sleep 0.1; done
}
spend() {
  curl -s $url/admin/teams -H "Authorization: Bearer sim-MODELGATE_ADMIN_KEY" |
    python3 -c 'import json,sys; u=[t for t in json.load(sys.stdin)["teams"] if t["name"]=="search"][0]["usage"]; print("spend_day", u["spend_day"])'
}
start
"$work/load" -url $url -n "$n" -c 16
case $mode in
kill)
  echo "before the kill: $(spend)"
  sleep 3
  kill -9 $pid
  wait $pid || true
  start
  echo "after a restart: $(spend)"
  kill $pid
  wait $pid || true
  ;;
term)
  t0=$(date +%s%N)
  kill -TERM $pid
  wait $pid || true
  echo "SIGTERM to exit: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  ;;
esac
