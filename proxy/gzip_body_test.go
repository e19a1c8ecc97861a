package proxy

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"modelgate/config"
)

func gzipped(t testing.TB, p []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(p); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bomb is n zero bytes, gzipped: about a thousandth of n on the wire.
func bomb(t testing.TB, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, len(zeros))
		zw.Write(zeros[:k])
		n -= k
	}
	zw.Close()
	return b.Bytes()
}

func TestGzipRequestBodies(t *testing.T) {
	const limit = 1 << 20
	env := newTestEnv(t, "", func(c *config.Config) { c.Server.MaxBodyBytes = limit })
	// Padding that compresses well but inflates past the limit only in the bomb case.
	cases := []struct {
		name, path, encoding string
		body                 []byte
		status               int
		upstream             bool
	}{
		{"chat", "/v1/chat/completions", "gzip", gzipped(t, []byte(chatBody)), 200, true},
		{"responses", "/v1/responses", "GZIP", gzipped(t, []byte(`{"model":"sim-chat","input":"hello"}`)), 200, true},
		{"identity", "/v1/chat/completions", "identity", []byte(chatBody), 200, true},
		{"bomb_chat", "/v1/chat/completions", "gzip", bomb(t, 16<<20), 413, false},
		{"bomb_responses", "/v1/responses", "gzip", bomb(t, 16<<20), 413, false},
		{"just_over", "/v1/chat/completions", "gzip", gzipped(t, []byte(`{"model":"sim-chat","messages":[{"role":"user","content":"`+strings.Repeat("a", limit)+`"}]}`)), 413, false},
		{"not_gzip", "/v1/chat/completions", "gzip", []byte(chatBody), 400, false},
		{"truncated", "/v1/chat/completions", "gzip", gzipped(t, []byte(chatBody))[:20], 400, false},
		{"brotli", "/v1/chat/completions", "br", []byte(chatBody), 415, false},
		{"gzip_twice", "/v1/chat/completions", "gzip, gzip", gzipped(t, gzipped(t, []byte(chatBody))), 415, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := env.upstreamCalls()
			status, _, body := env.do(t, http.MethodPost, c.path, keyAlpha1, c.body, "Content-Encoding", c.encoding)
			if status != c.status {
				t.Fatalf("status %d, want %d: %s", status, c.status, body)
			}
			if status != 200 && !bytes.Contains(body, []byte(`"error"`)) {
				t.Fatalf("refusal is not an OpenAI error: %s", body)
			}
			if got := env.upstreamCalls() > before; got != c.upstream {
				t.Fatalf("reached the platform: %v, want %v", got, c.upstream)
			}
		})
	}
	// What went upstream is the inflated request, never the gzip bytes.
	reqs := env.sim.Requests()
	if len(reqs) == 0 || !bytes.Contains(reqs[0].Body, []byte(`"hello"`)) || reqs[0].Header.Get("Content-Encoding") != "" {
		t.Fatalf("upstream request: %q %v", reqs[0].Body, reqs[0].Header)
	}
}

// countingReader counts what the handler took from the request body.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestGzipBombRefusedEarly: a bomb is refused once limit bytes came out of it, having read a
// small part of what was sent and held no more than the limit.
func TestGzipBombRefusedEarly(t *testing.T) {
	const limit = 1 << 20
	b := bomb(t, 64<<20)
	body := &countingReader{r: bytes.NewReader(b)}
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodPost, "/v1/chat/completions", body)
	c.Request.Header.Set("Content-Encoding", "gzip")
	c.Request.ContentLength = -1
	if _, ok := readJSONBody(c, limit); ok || w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("ok %v, status %d", ok, w.Code)
	}
	if body.n > int64(len(b))/8 {
		t.Fatalf("read %d of %d compressed bytes before refusing", body.n, len(b))
	}
	t.Logf("64 MiB bomb (%d bytes gzipped): refused after reading %d bytes", len(b), body.n)
}

// FuzzReadJSONBody: whatever the body and Content-Encoding, the reader never panics, never
// returns more than the limit, and a body it accepts uncompressed comes back unchanged.
func FuzzReadJSONBody(f *testing.F) {
	f.Add([]byte(chatBody), "")
	f.Add(gzipped(f, []byte(chatBody)), "gzip")
	f.Add(gzipped(f, []byte(strings.Repeat("x", 5000))), "x-gzip, identity")
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, "gzip")
	f.Add([]byte("{}"), "deflate")
	f.Fuzz(func(t *testing.T, raw []byte, encoding string) {
		const limit = 4096
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest(http.MethodPost, "/v1/responses", bytes.NewReader(raw))
		c.Request.Header.Set("Content-Encoding", encoding)
		out, ok := readJSONBody(c, limit)
		if !ok {
			if w.Code < 400 || w.Code > 499 {
				t.Fatalf("refused with status %d", w.Code)
			}
			return
		}
		if len(out) > limit || cap(out) > limit+1 {
			t.Fatalf("returned %d bytes (room for %d) past the limit %d", len(out), cap(out), limit)
		}
		if g, _ := requestGzipped(c); !g && !bytes.Equal(out, raw) {
			t.Fatalf("plain body changed")
		}
	})
}
