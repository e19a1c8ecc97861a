package reqbody_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"modelgate/reqbody"
)

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
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(raw))
		r.Header.Set("Content-Encoding", encoding)
		l := reqbody.Limits{MaxBytes: int64(limit), MaxInflating: int64(room), Budget: &budget}
		out, err := reqbody.Read(httptest.NewRecorder(), r, l)
		if budget.Used() != 0 {
			t.Fatalf("%d bytes of room held after the read", budget.Used())
		}
		if err != nil {
			var e *reqbody.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a *reqbody.Error", err)
			}
			if s := e.Kind.Status(); (s < 400 || s > 499) && e.Kind != reqbody.Busy {
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
	body := bytes.Repeat([]byte("a"), 4<<10)
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
