#!/usr/bin/env bash
# Builds modelgate, the benchmark upstream and the floor proxy, then runs the driver, which
# prints the results table on stdout (progress on stderr). Flags go to the driver, e.g.
#   bench/run.sh --rounds 7 --duration 5s
#   bench/run.sh --phases throughput,latency
# See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null; then
	echo "wrk not found; installing it from Debian" >&2
	apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
# modelgate is built as the Dockerfile builds it: static, stripped, and gin without its msgpack
# codec. The floor and the upstream get the same flags, so what differs is the code.
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -tags "nomsgpack${MGBENCH_TAGS:+,$MGBENCH_TAGS}" -o "$bin/" . ./bench/cmd/benchup ./bench/cmd/floor
go build -o "$bin/" ./bench/cmd/mgbench
"$bin/mgbench" --bin "$bin" "$@"
