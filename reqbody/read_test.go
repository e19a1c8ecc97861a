package reqbody_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"modelgate/reqbody"
)

// gz is p gzipped at level (gzip.BestCompression for bombs).
func gz(t testing.TB, p []byte, level int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, level)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(p); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// zeros is n zero bytes gzipped: about a thousandth of n on the wire.
func zeros(t testing.TB, n int) []byte { return gz(t, make([]byte, n), gzip.BestCompression) }

// trackedBody is a request body that counts what was read of it and whether it was closed.
type trackedBody struct {
	r      io.Reader
	read   int64
	closed bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}

func (b *trackedBody) Close() error { b.closed = true; return nil }

// cutBody ends with io.ErrUnexpectedEOF, as net/http's body does when the client hangs up
// before its declared length arrived.
type cutBody struct{ r io.Reader }

func (b cutBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func kindOf(err error) reqbody.Kind {
	if e := reqbody.Reason(err); e != nil {
		return e.Kind
	}
	return 0
}

// TestReason: a caller finds Read's *Error through wrapping, and any other error reads as
// Unreadable, so its switch needs no fallback of its own.
func TestReason(t *testing.T) {
	busy := &reqbody.Error{Kind: reqbody.Busy}
	cases := []struct {
		name string
		err  error
		want reqbody.Kind
	}{
		{"nil", nil, 0},
		{"own", busy, reqbody.Busy},
		{"wrapped", fmt.Errorf("reading: %w", busy), reqbody.Busy},
		{"foreign", io.ErrClosedPipe, reqbody.Unreadable},
	}
	for _, tc := range cases {
		e := reqbody.Reason(tc.err)
		if got := kindOf(tc.err); got != tc.want || (e == nil) != (tc.err == nil) {
			t.Errorf("%s: kind %v, want %v", tc.name, got, tc.want)
		}
		if tc.name == "foreign" && !errors.Is(e, io.ErrClosedPipe) {
			t.Errorf("foreign: %v does not wrap the reader's error", e)
		}
	}
}

func TestRead(t *testing.T) {
	const limit = 1 << 10
	plain := []byte(`{"model":"m","input":"hello"}`)
	exact := bytes.Repeat([]byte("a"), limit)
	over := bytes.Repeat([]byte("a"), limit+1)
	cases := []struct {
		name     string
		body     []byte
		encoding string
		declared int64 // -1: not declared; 0: len(body)
		cut      bool  // the client hangs up at the end of body
		canceled bool  // the request's context is done
		want     []byte
		kind     reqbody.Kind
	}{
		{name: "plain", body: plain, want: plain},
		{name: "plain_undeclared", body: plain, declared: -1, want: plain},
		{name: "exactly_the_limit", body: exact, declared: -1, want: exact},
		{name: "identity", body: plain, encoding: "identity", want: plain},
		{name: "declared_over", body: plain, declared: limit + 1, kind: reqbody.TooLarge},
		{name: "undeclared_over", body: over, declared: -1, kind: reqbody.TooLarge},
		{name: "gzip", body: gz(t, plain, gzip.DefaultCompression), encoding: "gzip", want: plain},
		{name: "GZIP_x_gzip_identity", body: gz(t, plain, 1), encoding: "X-GZIP, identity", want: plain},
		{name: "gzip_exact", body: gz(t, exact, 9), encoding: "gzip", want: exact},
		{name: "gzip_one_over", body: gz(t, over, 9), encoding: "gzip", kind: reqbody.TooLarge},
		{name: "bomb", body: zeros(t, 16<<20), encoding: "gzip", kind: reqbody.TooLarge},
		{name: "gzip_twice", body: gz(t, gz(t, plain, 1), 1), encoding: "gzip, gzip", kind: reqbody.UnsupportedEncoding},
		{name: "gzip_two_headers", body: plain, encoding: "gzip\nx-gzip", kind: reqbody.UnsupportedEncoding},
		{name: "brotli", body: plain, encoding: "br", kind: reqbody.UnsupportedEncoding},
		{name: "not_gzip", body: plain, encoding: "gzip", kind: reqbody.BadGzip},
		{name: "truncated_gzip", body: gz(t, plain, 1)[:20], encoding: "gzip", kind: reqbody.BadGzip},
		{name: "plain_cut", body: plain[:5], declared: int64(len(plain)), cut: true, kind: reqbody.ClientGone},
		{name: "canceled", body: gz(t, plain, 1)[:20], encoding: "gzip", canceled: true, kind: reqbody.ClientGone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var src io.Reader = bytes.NewReader(tc.body)
			if tc.cut {
				src = cutBody{src}
			}
			body := &trackedBody{r: src}
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			r.Body = body
			r.ContentLength = int64(len(tc.body))
			if tc.declared != 0 {
				r.ContentLength = tc.declared
			}
			for _, v := range strings.Split(tc.encoding, "\n") {
				r.Header.Add("Content-Encoding", v)
			}
			if tc.canceled {
				ctx, cancel := context.WithCancel(r.Context())
				cancel()
				r = r.WithContext(ctx)
			}
			got, err := reqbody.Read(httptest.NewRecorder(), r, reqbody.Limits{MaxBytes: limit})
			if kindOf(err) != tc.kind || (err != nil) != (tc.kind != 0) {
				t.Fatalf("error %v, want kind %v", err, tc.kind)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("read %q, want %q", got, tc.want)
			}
			if int64(cap(got)) > limit+1 {
				t.Fatalf("held room for %d bytes, past the limit %d", cap(got), limit)
			}
			if body.closed != (err == nil) {
				t.Fatalf("closed %v after error %v: a body read whole is closed, one refused is not", body.closed, err)
			}
			var e *reqbody.Error
			if errors.As(err, &e) && e.Kind == reqbody.TooLarge && e.Limit != limit {
				t.Fatalf("limit %d in the error, want %d", e.Limit, limit)
			}
			if tc.name == "declared_over" && body.read != 0 {
				t.Fatalf("read %d bytes of a body declared over the limit", body.read)
			}
		})
	}
}

// TestBombRefusedEarly: a bomb is refused once limit bytes came out of it, having read a
// small part of what was sent.
func TestBombRefusedEarly(t *testing.T) {
	const limit = 1 << 20
	b := zeros(t, 64<<20)
	body := &trackedBody{r: bytes.NewReader(b)}
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Body, r.ContentLength = body, -1
	r.Header.Set("Content-Encoding", "gzip")
	if _, err := reqbody.Read(httptest.NewRecorder(), r, reqbody.Limits{MaxBytes: limit}); kindOf(err) != reqbody.TooLarge {
		t.Fatalf("error %v, want too large", err)
	}
	if body.read > int64(len(b))/8 {
		t.Fatalf("read %d of %d compressed bytes before refusing", body.read, len(b))
	}
	t.Logf("64 MiB bomb (%d bytes gzipped): refused after reading %d bytes", len(b), body.read)
}

// TestInflatingBudget: gzip bodies take their room from the shared Budget as they inflate;
// one that cannot get room is refused as Busy at once, and every read, whole or refused,
// gives its room back. Plain bodies take none.
func TestInflatingBudget(t *testing.T) {
	const limit = 8 << 20
	small := gz(t, []byte(`{"a":1}`), 1)
	cases := []struct {
		name     string
		body     []byte
		encoding string
		room     int64
		others   bool // a stalled gzip body holds most of the room
		kind     reqbody.Kind
	}{
		{name: "small_gzip_fits", body: small, encoding: "gzip", room: 1 << 20},
		{name: "bomb_past_room", body: zeros(t, 4<<20), encoding: "gzip", room: 1 << 20, kind: reqbody.Busy},
		{name: "first_buffer_past_room", body: small, encoding: "gzip", room: 4 << 10, kind: reqbody.Busy},
		{name: "room_held_by_others", body: small, encoding: "gzip", room: 20000, others: true, kind: reqbody.Busy},
		{name: "plain_needs_no_room", body: bytes.Repeat([]byte("a"), 64<<10), room: 1 << 10},
		{name: "unbounded", body: zeros(t, 4<<20), encoding: "gzip"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var budget reqbody.Budget
			var held int64
			if tc.others {
				var end func()
				held, end = holdRoom(t, &budget, tc.room)
				defer end()
			}
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(tc.body))
			r.Header.Set("Content-Encoding", tc.encoding)
			_, err := reqbody.Read(httptest.NewRecorder(), r, reqbody.Limits{MaxBytes: limit, MaxInflating: tc.room, Budget: &budget})
			if kindOf(err) != tc.kind || (err != nil) != (tc.kind != 0) {
				t.Fatalf("error %v, want kind %v", err, tc.kind)
			}
			if got := budget.Used(); got != held {
				t.Fatalf("%d bytes of room held after the read, want %d", got, held)
			}
		})
	}
}

// holdRoom starts a gzip read from b, of a body that stops arriving after 12 KB inflated,
// as a slow client's does, once its buffer has grown from 8 KB to about 16 KB of room. It
// returns the room the read holds, and a func that ends the read and waits for it.
func holdRoom(t *testing.T, b *reqbody.Budget, room int64) (int64, func()) {
	t.Helper()
	pr, pw := io.Pipe()
	r := httptest.NewRequest(http.MethodPost, "/", pr)
	r.Header.Set("Content-Encoding", "gzip")
	done := make(chan error, 1)
	go func() {
		_, err := reqbody.Read(httptest.NewRecorder(), r, reqbody.Limits{MaxBytes: 64 << 20, MaxInflating: room, Budget: b})
		done <- err
	}()
	zw := gzip.NewWriter(pw)
	if _, err := zw.Write(make([]byte, 12<<10)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Flush(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); b.Used() < 16<<10; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled body took %d bytes of room, want its buffer grown once", b.Used())
		}
	}
	return b.Used(), func() {
		pw.CloseWithError(io.ErrUnexpectedEOF)
		if err := <-done; kindOf(err) != reqbody.BadGzip {
			t.Errorf("the stalled body ended with %v", err)
		}
		if b.Used() != 0 {
			t.Errorf("%d bytes of room held after every read ended", b.Used())
		}
	}
}

// FuzzRead: whatever the body, Content-Encoding, limit and inflating room, Read never
// panics, never holds room for more than limit+1 bytes, fails only with an *Error answered
// 4xx (or 503 for want of room), gives all the room back, and a plain body it accepts comes
// back unchanged.
func FuzzRead(f *testing.F) {
	plain := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	f.Add(plain, "", uint16(4096), uint32(0))
	f.Add(gz(f, plain, gzip.DefaultCompression), "gzip", uint16(4096), uint32(0))
	f.Add(gz(f, bytes.Repeat([]byte("x"), 5000), 9), "x-gzip, identity", uint16(4096), uint32(1<<20))
	f.Add(gz(f, plain, 1), "gzip", uint16(10), uint32(100))
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, "gzip", uint16(4096), uint32(0))
	f.Add([]byte("{}"), "deflate", uint16(1), uint32(0))
	f.Fuzz(func(t *testing.T, raw []byte, encoding string, limit uint16, room uint32) {
		var budget reqbody.Budget
		var inflight reqbody.Room
		var held reqbody.Held
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(raw))
		r.Header.Set("Content-Encoding", encoding)
		// The same figure bounds the room for bodies held, without waiting.
		l := reqbody.Limits{MaxBytes: int64(limit), MaxInflating: int64(room), Budget: &budget,
			Room: &inflight, MaxInflight: int64(room), Held: &held}
		out, err := reqbody.Read(httptest.NewRecorder(), r, l)
		if budget.Used() != 0 {
			t.Fatalf("%d bytes of room held after the read", budget.Used())
		}
		if want := int64(cap(out)); inflight.Used() != held.Bytes() || held.Bytes() != want {
			t.Fatalf("room %d, held %d, for a body of room %d and error %v", inflight.Used(), held.Bytes(), cap(out), err)
		}
		held.Release()
		if inflight.Used() != 0 {
			t.Fatalf("%d bytes of room held after the release", inflight.Used())
		}
		if err != nil {
			var e *reqbody.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a *reqbody.Error", err)
			}
			if s := e.Kind.Status(); (s < 400 || s > 499) && e.Kind != reqbody.Busy && e.Kind != reqbody.NoRoom {
				t.Fatalf("%v answered %d", e.Kind, s)
			}
			if out != nil {
				t.Fatalf("%d bytes returned with error %v", len(out), err)
			}
			return
		}
		if len(out) > int(limit) || cap(out) > int(limit)+1 {
			t.Fatalf("returned %d bytes (room for %d) past the limit %d", len(out), cap(out), limit)
		}
		if !strings.Contains(strings.ToLower(encoding), "gzip") && !bytes.Equal(out, raw) {
			t.Fatal("plain body changed")
		}
	})
}

// discardWriter is a ResponseWriter that keeps nothing, so the benchmark measures Read.
type discardWriter struct{ h http.Header }

func (w discardWriter) Header() http.Header       { return w.h }
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) WriteHeader(int)             {}

// BenchmarkRead4KB: a 4 KB plain body with its length declared, the common case of a chat
// request: one buffer of exactly its size.
func BenchmarkRead4KB(b *testing.B) {
	benchRead(b, 4<<10)
}

// BenchmarkRead256KB: a 256 KB plain body with its length declared: its buffer doubles from
// 16 KiB as the bytes arrive, ending at exactly its size.
func BenchmarkRead256KB(b *testing.B) {
	benchRead(b, 256<<10)
}

// benchRead reads a plain body of size bytes, its length declared, until b.Loop ends.
func benchRead(b *testing.B, size int) {
	body := bytes.Repeat([]byte("a"), size)
	src := bytes.NewReader(body)
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Body, r.ContentLength = io.NopCloser(src), int64(len(body))
	w := discardWriter{h: http.Header{}}
	l := reqbody.Limits{MaxBytes: 32 << 20}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(body)
		if _, err := reqbody.Read(w, r, l); err != nil {
			b.Fatal(err)
		}
	}
}
