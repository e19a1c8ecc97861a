package proxy

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"modelgate/apitest"
)

// depthChildEnv marks the child process TestStreamHeaderWaitDepth measures a stream in.
const depthChildEnv = "MODELGATE_STACK_DEPTH_CHILD"

// headerWaitMark is the panic that ends the child once its stream's handler waits for the
// platform's headers: the runtime then prints every goroutine, with each frame's fp and sp
// at traceback level "system", the one way a Go program reads them off a parked goroutine.
const headerWaitMark = "modelgate stack check: handler at the header wait"

// maxHeaderWaitDepth is how deep, in bytes from the top of the serving goroutine's stack, a
// stream's handler may wait for the platform's answer headers. Of an 8 KB stack, the lowest
// 928 bytes are the runtime's guard (a function that would reach into them grows the stack
// first); the rest under the wait, about 1.1 KB, is for what the runtime calls there (a
// sudog or a span to allocate) without growing the stack to 16 KB.
const maxHeaderWaitDepth = 6 << 10

// TestStreamHeaderWaitDepth: the deepest a stream's handler goes before its first event is
// the transport's wait for the platform's answer headers, and it must leave the runtime
// room under it on an 8 KB stack (TestOpenStreamStack, whose cap meets that wait too deep
// only in the runs where the runtime happens to allocate under it). For each way of
// speaking to the platform and each streaming route, a child process holds a stream at
// that wait and prints its stack; the parent reads each frame's size from it and reports
// the chain. amd64 without the race detector only, as TestOpenStreamStack.
func TestStreamHeaderWaitDepth(t *testing.T) {
	if raceEnabled || runtime.GOARCH != "amd64" {
		t.Skip("the 8 KB budget is checked on amd64 without the race detector")
	}
	for _, mode := range upstreamModes {
		t.Run(mode.name, func(t *testing.T) {
			for _, r := range stackRoutes {
				t.Run(r.name, func(t *testing.T) {
					inChild, out, err := apitest.RunInChild(t, depthChildEnv)
					if inChild {
						holdAtHeaderWait(t, mode.env, r)
						return
					}
					dump, ok := strings.CutPrefix(string(out[strings.Index(string(out), "panic: "+headerWaitMark)+1:]), "anic: ")
					if err == nil || !ok {
						t.Fatalf("the child did not stop at the header wait: %v\n%s", err, firstLines(out, 150))
					}
					trace := findHandler(dump, atHeaderWait)
					if trace == "" {
						t.Fatalf("no handler at the header wait in the child's goroutines:\n%s", firstLines([]byte(dump), 150))
					}
					depth, chain, err := frameChain(trace)
					if err != nil {
						t.Fatalf("%v:\n%s", err, trace)
					}
					if depth > maxHeaderWaitDepth {
						t.Errorf("%s on %s: the handler waits for the platform's headers %d bytes deep, more than %d; frame size and depth of each frame:\n%s",
							r.path, mode.name, depth, maxHeaderWaitDepth, chain)
						return
					}
					t.Logf("%s on %s: the header wait is %d bytes deep:\n%s", r.path, mode.name, depth, chain)
				})
			}
		})
	}
}

// holdAtHeaderWait runs in the child: it opens a stream on route r, waits until its
// handler waits for the platform's headers, which the platform holds back, and then ends
// the process with the stacks printed.
func holdAtHeaderWait(t *testing.T, o envOptions, r struct{ name, path, body string }) {
	up := holdingUpstream{headers: make(chan struct{})}
	env, ended := startStackEnv(t, o, up)
	warmStream(t, env, ended, 0, r)
	s := sendRawStream(t, env.front.URL, r.path, r.body)
	defer s.Close()
	waitHandler(t, r.path, atHeaderWait)
	debug.SetTraceback("system")
	done := make(chan struct{})
	go func() {
		defer close(done)
		panic(headerWaitMark)
	}()
	<-done // not reached: the panic ends the process
}

// atHeaderWait: the handler waits in the transport's round trip for the answer's headers.
func atHeaderWait(status, trace string) bool {
	return status == "select" && (strings.Contains(trace, "\nnet/http.(*http2ClientConn).RoundTrip(") ||
		strings.Contains(trace, "\nnet/http.(*persistConn).roundTrip("))
}

// frameChain reads a goroutine's traceback at level "system": how deep its innermost frame
// sits under its outermost (the highest fp less the lowest sp), and a table of its frames
// from the innermost out, each with its own size (fp - sp; inlined calls, which have no frame
// of their own, show none) and the depth of its lowest byte.
func frameChain(trace string) (int, string, error) {
	type frame struct {
		fn     string
		fp, sp uint64
	}
	var frames []frame
	lines := strings.Split(trace, "\n")
	for i := 1; i+1 < len(lines); i++ {
		fn, pos := lines[i], lines[i+1]
		if !strings.HasPrefix(pos, "\t") || strings.HasPrefix(fn, "\t") || strings.HasPrefix(fn, "created by ") {
			continue
		}
		if i := strings.LastIndex(fn, "("); i > 0 && strings.HasSuffix(fn, ")") {
			fn = fn[:i] // the arguments
		}
		f := frame{fn: fn}
		if _, rest, ok := strings.Cut(pos, " fp="); ok {
			if _, err := fmt.Sscanf(rest, "%v sp=%v", &f.fp, &f.sp); err != nil {
				return 0, "", fmt.Errorf("frame line %q: %v", pos, err)
			}
		}
		frames = append(frames, f)
		i++
	}
	var top, bottom uint64
	for _, f := range frames {
		top = max(top, f.fp)
		if f.sp != 0 && (bottom == 0 || f.sp < bottom) {
			bottom = f.sp
		}
	}
	if bottom == 0 {
		return 0, "", fmt.Errorf("no frame addresses in the traceback")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  %6s %6s  %s\n", "size", "depth", "function")
	for _, f := range frames {
		if f.sp == 0 {
			fmt.Fprintf(&b, "  %6s %6s  %s (inlined)\n", "", "", f.fn)
			continue
		}
		fmt.Fprintf(&b, "  %6d %6d  %s\n", f.fp-f.sp, top-f.sp, f.fn)
	}
	return int(top - bottom), b.String(), nil
}
