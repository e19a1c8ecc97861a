package reqbody_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"modelgate/reqbody"
)

// TestRoomTake: what fits is taken at once; what does not waits for room given back, until
// its wait or its context ends; what could never fit is refused without waiting.
func TestRoomTake(t *testing.T) {
	cases := []struct {
		name   string
		held   int64 // taken before
		n, max int64
		wait   time.Duration
		give   bool // room is given back while it waits
		cancel bool // its context ends while it waits
		want   bool
	}{
		{name: "fits", held: 10, n: 90, max: 100, want: true},
		{name: "unbounded", held: 1 << 40, n: 1 << 40, max: 0, want: true},
		{name: "full_no_wait", held: 50, n: 51, max: 100},
		{name: "full_room_given_back", held: 50, n: 51, max: 100, wait: time.Minute, give: true, want: true},
		{name: "full_context_ends", held: 50, n: 51, max: 100, wait: time.Minute, cancel: true},
		{name: "full_wait_ends", held: 50, n: 51, max: 100, wait: time.Millisecond},
		{name: "never_fits", n: 101, max: 100, wait: time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r reqbody.Room
			r.Force(tc.held)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan bool, 1)
			go func() { got <- r.Take(ctx, tc.n, tc.max, tc.wait) }()
			switch {
			case tc.give:
				r.Give(tc.held) // before or during the wait: either way the room is there
			case tc.cancel:
				cancel()
			}
			var ok bool
			select {
			case ok = <-got:
			case <-time.After(30 * time.Second):
				t.Fatal("Take still waits")
			}
			if ok != tc.want {
				t.Fatalf("Take = %t, want %t", ok, tc.want)
			}
			want := tc.held
			if tc.give {
				want = 0
			}
			if ok {
				want += tc.n
			}
			if r.Used() != want {
				t.Fatalf("room used %d, want %d", r.Used(), want)
			}
		})
	}
}

// stallingBody sends its first bytes, then blocks, as a client that declared a large body
// and stopped sending does; stalled is closed when a read blocks, and the read ends with
// io.ErrUnexpectedEOF once end is closed.
type stallingBody struct {
	first   []byte
	stalled chan struct{}
	end     chan struct{}
}

func (b *stallingBody) Read(p []byte) (int, error) {
	if len(b.first) > 0 {
		n := copy(p, b.first)
		b.first = b.first[n:]
		return n, nil
	}
	close(b.stalled)
	<-b.end
	return 0, io.ErrUnexpectedEOF
}

func (b *stallingBody) Close() error { return nil }

// TestStalledBodyHoldsWhatArrived: a body declaring 1 MiB that sent 100 bytes holds the
// first buffer's room, not its declared size, while it stalls, and nothing once it failed.
func TestStalledBodyHoldsWhatArrived(t *testing.T) {
	var room reqbody.Room
	var held reqbody.Held
	body := &stallingBody{first: bytes.Repeat([]byte("a"), 100), stalled: make(chan struct{}), end: make(chan struct{})}
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Body, r.ContentLength = body, 1<<20
	done := make(chan error, 1)
	go func() {
		_, err := reqbody.Read(httptest.NewRecorder(), r, reqbody.Limits{MaxBytes: 32 << 20, Room: &room, MaxInflight: 256 << 20, Held: &held})
		done <- err
	}()
	select {
	case <-body.stalled:
	case <-time.After(30 * time.Second):
		t.Fatal("the body was never read")
	}
	if got := room.Used(); got != 16<<10 {
		t.Errorf("a stalled body declaring 1 MiB holds %d bytes of room, want its first 16 KiB buffer", got)
	}
	close(body.end)
	if err := <-done; kindOf(err) != reqbody.ClientGone {
		t.Fatalf("the cut body ended with %v", err)
	}
	if room.Used() != 0 || held.Bytes() != 0 {
		t.Fatalf("room %d, held %d after the read failed", room.Used(), held.Bytes())
	}
}

// TestDeclaredSizeNotAllocated: what a read allocates for a body declaring 1 MiB that sends
// 100 bytes and hangs up, measured by the runtime: the old read allocated the declared size
// at once.
func TestDeclaredSizeNotAllocated(t *testing.T) {
	read := func() {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Body = io.NopCloser(cutBody{bytes.NewReader(make([]byte, 100))})
		r.ContentLength = 1 << 20
		if _, err := reqbody.Read(httptest.NewRecorder(), r, reqbody.Limits{MaxBytes: 32 << 20}); kindOf(err) != reqbody.ClientGone {
			t.Fatalf("the cut body ended with %v", err)
		}
	}
	read() // warm up whatever is allocated once
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const rounds = 8
	for range rounds {
		read()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / rounds; per > 256<<10 {
		t.Fatalf("each read of a 100-byte body declaring 1 MiB allocated %d bytes", per)
	}
}

// TestReadHeld: a body read whole holds room for its buffer (of its declared size, reached
// by doubling) until released, once; a read that finds the room full waits or is refused
// with NoRoom (503), holding nothing.
func TestReadHeld(t *testing.T) {
	const size = 100_000
	cases := []struct {
		name     string
		others   int64 // room held by other requests
		max      int64
		declared bool
		wait     time.Duration
		kind     reqbody.Kind
		room     int64 // the body's room once read
	}{
		{name: "declared_exact_buffer", max: 1 << 20, declared: true, room: size + 1},
		{name: "undeclared_doubles", max: 1 << 20, room: 134656},
		{name: "full_at_first_buffer", others: 1 << 20, max: 1 << 20, declared: true, kind: reqbody.NoRoom},
		{name: "full_while_growing", others: 1<<20 - 40<<10, max: 1 << 20, declared: true, kind: reqbody.NoRoom},
		{name: "full_wait_ends", others: 1<<20 - 40<<10, max: 1 << 20, declared: true, wait: time.Millisecond, kind: reqbody.NoRoom},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var room reqbody.Room
			var held reqbody.Held
			room.Force(tc.others)
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(bytes.Repeat([]byte("a"), size)))
			if !tc.declared {
				r.ContentLength = -1
			}
			w := httptest.NewRecorder()
			body, err := reqbody.Read(w, r, reqbody.Limits{MaxBytes: 32 << 20, Room: &room, MaxInflight: tc.max, RoomWait: tc.wait, Held: &held})
			if kindOf(err) != tc.kind || (err != nil) != (tc.kind != 0) {
				t.Fatalf("error %v, want kind %v", err, tc.kind)
			}
			if err != nil {
				if s := reqbody.Reason(err).Kind.Status(); s != http.StatusServiceUnavailable {
					t.Errorf("NoRoom answered %d", s)
				}
				if room.Used() != tc.others || held.Bytes() != 0 {
					t.Fatalf("room %d, held %d after a refusal, want %d, 0", room.Used(), held.Bytes(), tc.others)
				}
				return
			}
			if len(body) != size || int64(cap(body)) != tc.room || held.Bytes() != tc.room || room.Used() != tc.room {
				t.Fatalf("body %d bytes in %d of room; held %d, room %d; want room %d", len(body), cap(body), held.Bytes(), room.Used(), tc.room)
			}
			held.Release()
			held.Release()
			if room.Used() != 0 {
				t.Fatalf("room %d after two releases", room.Used())
			}
		})
	}
}

// TestReadWaitsForRoom: a body that finds the room full reads once another request gives
// its room back within the wait.
func TestReadWaitsForRoom(t *testing.T) {
	var room reqbody.Room
	room.Force(1 << 20)
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader([]byte(`{"a":1}`)))
	done := make(chan error, 1)
	go func() {
		_, err := reqbody.Read(httptest.NewRecorder(), r, reqbody.Limits{MaxBytes: 1 << 10, Room: &room, MaxInflight: 1 << 20, RoomWait: time.Minute})
		done <- err
	}()
	room.Give(1 << 20)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the read still waits for room given back")
	}
	if room.Used() != 0 {
		t.Fatalf("room %d after a read that keeps no Held", room.Used())
	}
}
