# A gdb script that reports which call chains make goroutine stacks grow, for keeping the
# goroutine that holds an open stream on a small stack (see bench/README.md).
#
#   go build -tags nomsgpack -o /tmp/mg .          # keep symbols: no -ldflags "-s -w"
#   gdb -p <pid of /tmp/mg> -batch -x bench/tools/stackgrowth.py -ex continue
#
# then open streams against it and stop gdb with Ctrl-C. For every distinct chain that asks
# for a stack larger than MIN_FROM bytes it prints the stack size, the bytes in use, and each
# frame with the depth (bytes from the top of the stack) at which it sits.
import gdb

MIN_FROM = 8192  # report growth out of stacks of at least this size

inferior = gdb.selected_inferior()
g_type = gdb.lookup_type('runtime.g').pointer()
seen = set()


def word(addr):
    return int.from_bytes(inferior.read_memory(addr, 8).tobytes(), 'little')


def name(pc):
    s = gdb.execute('info symbol %#x' % pc, to_string=True).split(' in section')[0]
    return s.split(' + ')[0].strip()


class Growth(gdb.Breakpoint):
    def stop(self):
        # newstack runs on g0 (in R14 under the register ABI); the goroutine that needs more
        # stack is g0.m.curg, its state saved by morestack.
        g0 = gdb.Value(int(gdb.parse_and_eval('$r14'))).cast(g_type)
        gp = g0['m']['curg']
        lo, hi = int(gp['stack']['lo']), int(gp['stack']['hi'])
        if hi - lo < MIN_FROM:
            return False
        sp, bp, pc = int(gp['sched']['sp']), int(gp['sched']['bp']), int(gp['sched']['pc'])
        chain = [(hi - sp, name(pc))]
        while lo <= bp < hi and len(chain) < 80:
            chain.append((hi - bp, name(word(bp + 8))))
            bp = word(bp)
        key = tuple(n for _, n in chain[:10])
        if key in seen:
            return False
        seen.add(key)
        # newstack also runs for preemption requests; those are the rows whose use is far
        # below the stack size.
        print('stack %d bytes, %d in use' % (hi - lo, hi - sp))
        for depth, fn in chain:
            print('  %6d  %s' % (depth, fn))
        return False


Growth('runtime.newstack')
