#!/usr/bin/env bash
# Builds modelgate, the benchmark upstream and the floor proxy, then runs the driver, which
# prints the results table on stdout (progress on stderr). Flags go to the driver, e.g.
#   bench/run.sh --rounds 7 --duration 5s
#   bench/run.sh --phases throughput,latency
#   bench/run.sh --phases throughput --rounds 10 --baseline main   # this tree against main
# See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null; then
	echo "wrk not found; installing it from Debian" >&2
	apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
fi
# --baseline REV (or --baseline=REV) is the driver's flag, but the build is done here, so that
# both modelgates come out of the one build line below.
baseline=
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
	case ${args[i]} in
	--baseline | -baseline) baseline=${args[i + 1]:-} ;;
	--baseline=* | -baseline=*) baseline=${args[i]#*=} ;;
	esac
done
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
# modelgate is built as the Dockerfile builds it: static, stripped, gin without its msgpack
# codec, and no VCS stamp (the image's build context leaves .git out; here, the baseline's
# unpacked tree has none, so stamping the work tree's build would make two builds of one
# commit differ). The floor, the upstream and the baseline get the same flags, so what
# differs is the code.
build() {
	CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -tags "nomsgpack${MGBENCH_TAGS:+,$MGBENCH_TAGS}" "$@"
}
build -o "$bin/" . ./bench/cmd/benchup ./bench/cmd/floor
# What the report names the candidate: the commit the work tree is on, and whether it has
# changes beside it.
{ git rev-parse --short=12 HEAD | tr -d '\n'; [ -z "$(git status --porcelain)" ] || printf '+changes'; echo; } >"$bin/modelgate.commit" 2>/dev/null || true
if [ -n "$baseline" ]; then
	# git archive leaves the repository as it is (no worktree to register and prune), and
	# takes the committed tree only: the baseline never sees this work tree's changes.
	commit=$(git rev-parse --verify --quiet --end-of-options "$baseline^{commit}") || {
		echo "bench/run.sh: --baseline $baseline is not a commit here" >&2
		exit 2
	}
	mkdir "$bin/baseline-src"
	git archive "$commit" | tar -x -C "$bin/baseline-src"
	echo "building the baseline, $baseline ($commit)" >&2
	(cd "$bin/baseline-src" && build -o "$bin/modelgate-baseline" .)
	rm -rf "$bin/baseline-src"
	if cmp -s "$bin/modelgate" "$bin/modelgate-baseline"; then
		echo "the two builds are the same bytes: the comparison reads only the method's noise" >&2
	fi
	git rev-parse --short=12 "$commit" >"$bin/modelgate-baseline.commit"
fi
go build -o "$bin/" ./bench/cmd/mgbench
"$bin/mgbench" --bin "$bin" "$@"
