package relay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"modelgate/translate"
)

// lockedRecorder lets the keep-alive timer and the test touch one recorder.
type lockedRecorder struct {
	mu sync.Mutex
	*httptest.ResponseRecorder
}

func (r *lockedRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ResponseRecorder.Write(p)
}

func (r *lockedRecorder) WriteString(s string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ResponseRecorder.WriteString(s)
}

func (r *lockedRecorder) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ResponseRecorder.Flush()
}

func (r *lockedRecorder) body() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.ResponseRecorder.Body.Bytes())
}

// A route can give its dialect's own keep-alive frame (Anthropic's ping event); it goes out
// whole, between events, in place of the SSE comment.
func TestKeepAliveFramePerRoute(t *testing.T) {
	rec := &lockedRecorder{ResponseRecorder: httptest.NewRecorder()}
	ping := "event: ping\ndata: {\"type\": \"ping\"}\n\n"
	sw := NewWriterFrame(rec, 20*time.Millisecond, ping)
	if err := sw.Write([]byte("event: message_start\ndata: {}\n\n")); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return bytes.Count(rec.body(), []byte(ping)) >= 2 }) {
		t.Fatalf("stream %q: fewer than two pings", rec.body())
	}
	sw.Stop()
	got := rec.body()
	if bytes.Contains(got, []byte(KeepAliveComment)) {
		t.Fatalf("stream %q: want ping frames and no comment", got)
	}
	if !bytes.HasPrefix(got, []byte("event: message_start\ndata: {}\n\n")) {
		t.Fatalf("stream %q", got)
	}
	if n := len(rec.body()); n != len(got) {
		t.Fatal("a keep-alive was written after Stop")
	}
}

// brokenClient fails every write: the client left.
type brokenClient struct{ writes int }

func (b *brokenClient) Write([]byte) (int, error) { b.writes++; return 0, errors.New("gone") }
func (b *brokenClient) Flush()                    {}

// The first failed write is remembered: later writes do not reach the connection, and the
// relay learns the client is gone.
func TestWriterStopsAfterAFailedWrite(t *testing.T) {
	for _, every := range []time.Duration{0, time.Hour} {
		b := &brokenClient{}
		sw := NewWriter(b, every)
		if sw.Queue([]byte("data: 1\n\n")) == nil || sw.Write([]byte("data: 2\n\n")) == nil || sw.Err() == nil {
			t.Fatal("a failed write was not reported")
		}
		sw.Stop()
		if b.writes != 1 {
			t.Fatalf("keep-alive %v: %d writes reached a gone client, want 1", every, b.writes)
		}
	}
}

// flushLog is a client connection that notes, at each flush, how many bytes had been written.
type flushLog struct {
	bytes.Buffer
	flushed []int // the buffer's length at each flush
}

func (f *flushLog) Flush() { f.flushed = append(f.flushed, f.Len()) }

// A stream's headers wait for the first read from the platform: what it brings leaves with
// them, in one write when it was all there; before any later read everything unsent goes,
// headers included, so neither an event nor the headers wait while modelgate waits.
func TestWriterSendsHeadersWithTheFirstEvents(t *testing.T) {
	const ev = "data: {}\n\n"
	steps := []struct {
		name string
		do   func(*Writer)
		want []int // the flushes so far
	}{
		{"first read: nothing flushed", func(w *Writer) { w.BeforeWait() }, nil},
		{"its events queued", func(w *Writer) { _ = w.Queue([]byte(ev)); _ = w.Queue([]byte(ev)) }, nil},
		{"second read: headers and events", func(w *Writer) { w.BeforeWait() }, []int{2 * len(ev)}},
		{"third read, nothing new: no flush", func(w *Writer) { w.BeforeWait() }, []int{2 * len(ev)}},
		{"an event and a read", func(w *Writer) { _ = w.Queue([]byte(ev)); w.BeforeWait() }, []int{2 * len(ev), 3 * len(ev)}},
	}
	f := &flushLog{}
	w := NewWriter(f, 0)
	for _, s := range steps {
		s.do(w)
		if !slices.Equal(f.flushed, s.want) {
			t.Fatalf("%s: flushes at %v, want %v", s.name, f.flushed, s.want)
		}
	}

	// A platform that sent its headers and nothing more: the headers go before the second
	// wait even with no event to carry.
	f = &flushLog{}
	w = NewWriter(f, 0)
	w.BeforeWait()
	w.BeforeWait()
	if !slices.Equal(f.flushed, []int{0}) {
		t.Fatalf("headers alone: flushes at %v, want one, of nothing but the headers", f.flushed)
	}

	// A stream all in hand: no flush; the handler's return sends it.
	f = &flushLog{}
	w = NewWriter(f, 0)
	w.BeforeWait()
	_ = w.Queue([]byte(ev))
	w.Stop()
	if len(f.flushed) != 0 || f.String() != ev {
		t.Fatalf("a stream in hand: flushes at %v, body %q; want no flush and the event written", f.flushed, f.String())
	}
}

// What outgrows the room beside unsent headers is written whole and in order, unflushed: it
// waits for the next flush like any queued event.
func TestWriterOutgrowsTheRoomBesideTheHeaders(t *testing.T) {
	f := &flushLog{}
	w := NewWriter(f, 0)
	w.BeforeWait()
	small, large := bytes.Repeat([]byte("a"), unsentRoom-10), bytes.Repeat([]byte("b"), 64)
	if w.Queue(small) != nil || w.Queue(large) != nil || w.Queue(small) != nil {
		t.Fatal("a write failed")
	}
	if len(f.flushed) != 0 {
		t.Fatalf("flushes at %v before any wait, want none", f.flushed)
	}
	want := string(small) + string(large) + string(small)
	if f.String() != want {
		t.Fatalf("written %d bytes out of order or lost, want %d", f.Len(), len(want))
	}
	w.BeforeWait()
	if !slices.Equal(f.flushed, []int{len(want)}) {
		t.Fatalf("flushes at %v, want one of %d bytes", f.flushed, len(want))
	}
}

// A stream the platform sent whole, its end read with its last event, leaves in the
// response's one write: neither relay flushes. When the end is still to be read (it may
// wait), what was relayed is flushed first.
func TestWholeStreamLeavesWithTheResponsesEnd(t *testing.T) {
	stream := created + delta + delta + complete
	relays := []struct {
		name string
		run  func(*Pump, io.Reader)
	}{
		{"responses", func(p *Pump, r io.Reader) { p.Responses(r, func() {}) }},
		{"chat", func(p *Pump, r io.Reader) { p.Direct(r, func() {}, translate.NewStreamConverter(chatMeta())) }},
	}
	for _, rl := range relays {
		f := &flushLog{}
		rl.run(newPump(context.Background(), f, &record{}), iotest.DataErrReader(strings.NewReader(stream)))
		if len(f.flushed) != 0 || f.Len() == 0 {
			t.Errorf("%s, end read with the last event: flushes at %v of %d bytes written, want none", rl.name, f.flushed, f.Len())
		}
	}
	// The pass-through drains the platform's stream after its terminal event: flushed first.
	f := &flushLog{}
	newPump(context.Background(), f, &record{}).Responses(strings.NewReader(stream), func() {})
	if !slices.Equal(f.flushed, []int{len(stream)}) {
		t.Fatalf("responses, end still to read: flushes at %v, want one of %d bytes", f.flushed, len(stream))
	}
}
