# Splits a CPU profile of a proxy under load by the goroutine each sample ran on (the function
# that goroutine started in, or the runtime's background work), in µs per request, so two
# runs (modelgate on h1 and h2, or modelgate and the floor) compare part by part. The input is
# `perf record -g` of the process while wrk drives it; frame pointers let perf walk Go stacks,
# but keep symbols (no -ldflags "-s -w"). See docs/performance.md, "HTTP/1.1 against HTTP/2".
#
#   CGO_ENABLED=0 go build -tags nomsgpack -o /tmp/mg .           # likewise ./bench/cmd/floor
#   perf record -F 2000 -g -o mg.data -p <pid> -- sleep 5         # while wrk runs, 6 s
#   python3 bench/tools/cpusplit.py mg.data <process CPU µs per request over the same run>
import collections
import subprocess
import sys

# The first rule whose text appears anywhere in a sample's stack names its part.
RULES = [
    ('stack growth (morestack)', 'runtime.morestack'),
    ('floor: header flush timer (ReverseProxy)', 'maxLatencyWriter).delayedFlush'),
    ('h2: per-stream writer goroutine', 'http2clientStream).doRequest'),
    ('h2: connection read loop', 'http2ClientConn).readLoop'),
    ('h1: connection write loop', 'persistConn).writeLoop'),
    ('h1: connection read loop', 'persistConn).readLoop'),
    ('handler', 'ServeHTTP'),
    ('client connection, outside the handler', '(*conn).serve'),
    ('client connection, background read', 'backgroundRead'),
    ('modelgate: response keeper', 'stored.(*Keeper)'),
    ('GC mark', 'gcBgMarkWorker'),
    ('GC sweep', 'bgsweep'),
    ('GC scavenge', 'bgscavenge'),
    ('sysmon', 'runtime.sysmon'),
    ('scheduler', 'runtime.mcall'),
    ('scheduler', 'runtime.mstart'),
]


def split(path):
    out = subprocess.run(['perf', 'script', '-i', path, '-F', 'ip,sym'],
                         capture_output=True, text=True, check=True).stdout
    parts, total = collections.Counter(), 0
    for sample in out.split('\n\n'):
        if not sample.strip():
            continue
        total += 1
        for name, text in RULES:
            if text in sample:
                parts[name] += 1
                break
        else:
            parts['other'] += 1
    return parts, total


def main():
    path, us_per_request = sys.argv[1], float(sys.argv[2])
    parts, total = split(path)
    for name, n in parts.most_common():
        print('%6.1f µs  %s' % (n / total * us_per_request, name))
    print('%6.1f µs  total (%d samples)' % (us_per_request, total))


if __name__ == '__main__':
    main()
