# A gdb script that counts where a running modelgate's stack memory is: the live goroutine
# stacks by size and by the function each goroutine started in, and the free room left in the
# runtime's stack pool (spans that still hold some live stacks cannot be returned, so their
# free slots stay resident). See bench/README.md.
#
#   go build -tags nomsgpack -o /tmp/mg .          # keep symbols: no -ldflags "-s -w"
#   gdb -p <pid of /tmp/mg> -batch -x bench/tools/stacks.py     # while the streams are open
import collections

import gdb

SPAN = 32 << 10  # the stack pool's span size (_StackCacheSize)


def start_name(pc):
    if not pc:
        return '?'
    return gdb.execute('info symbol %#x' % pc, to_string=True).split(' in section')[0].split(' + ')[0].strip()


def live():
    allgs = gdb.parse_and_eval("'runtime.allgs'")
    counts = collections.Counter()
    for i in range(int(allgs['len'])):
        g = allgs['array'][i]
        size = int(g['stack']['hi']) - int(g['stack']['lo'])
        if size:
            counts[(size, start_name(int(g['startpc'])))] += 1
    total = sum(size * n for (size, _), n in counts.items())
    gdb.write('live goroutine stacks: %.1f MB\n' % (total / (1 << 20)))
    for (size, fn), n in counts.most_common(15):
        gdb.write('  %6d x %5d B  %s\n' % (n, size, fn))


def pool():
    stackpool = gdb.parse_and_eval("'runtime.stackpool'")
    gdb.write('stack pool, spans with free slots:\n')
    for order in range(4):
        size = 2048 << order
        s = stackpool[order]['item']['span']['first']
        spans = used = 0
        while int(s):
            spans += 1
            used += int(s['allocCount'])
            s = s['next']
        free = spans * SPAN - used * size
        gdb.write('  %5d B stacks: %4d spans, %5d live stacks in them, %7.1f KB free\n' % (size, spans, used, free / 1024))


live()
pool()
