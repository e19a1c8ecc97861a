package proxy

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"modelgate/apierr"
	"modelgate/config"
	"modelgate/reqbody"
	"modelgate/translate"
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

// TestBodyRefusals: each way reqbody refuses a body is answered in the route's shape, with
// the status and code clients see today, and noted on the request's record.
func TestBodyRefusals(t *testing.T) {
	cases := []struct {
		name                   string
		err                    error
		status                 int
		code, refusal          string
		clientGone, retryAfter bool
	}{
		{name: "too_large", err: &reqbody.Error{Kind: reqbody.TooLarge, Limit: 32 << 20}, status: 413, code: "request_too_large"},
		{name: "timed_out", err: &reqbody.Error{Kind: reqbody.TimedOut, Err: os.ErrDeadlineExceeded}, status: 408, code: "request_timeout"},
		{name: "encoding", err: &reqbody.Error{Kind: reqbody.UnsupportedEncoding}, status: 415, code: "unsupported_content_encoding"},
		{name: "busy", err: &reqbody.Error{Kind: reqbody.Busy}, status: 503, code: "server_busy", refusal: "inflating", retryAfter: true},
		{name: "no_room", err: &reqbody.Error{Kind: reqbody.NoRoom}, status: 503, code: "server_busy", refusal: "body_memory", retryAfter: true},
		{name: "bad_gzip", err: &reqbody.Error{Kind: reqbody.BadGzip}, status: 400, code: "invalid_body"},
		{name: "client_gone", err: &reqbody.Error{Kind: reqbody.ClientGone, Err: io.ErrUnexpectedEOF}, status: 400, code: "invalid_body", clientGone: true},
		{name: "unreadable", err: &reqbody.Error{Kind: reqbody.Unreadable}, status: 400, code: "invalid_body"},
		{name: "not_typed", err: io.ErrClosedPipe, status: 400, code: "invalid_body"},
	}
	for _, tc := range cases {
		for _, anthropic := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/anthropic=%v", tc.name, anthropic), func(t *testing.T) {
				w := httptest.NewRecorder()
				c, _ := gin.CreateTestContext(w)
				c.Request = httptest.NewRequest(http.MethodPost, "/v1/responses", nil)
				ri := info(c)
				if anthropic {
					apierr.Mark(c, apierr.Anthropic)
				}
				apierr.BodyRefused(c, tc.err)
				want := tc.status
				if anthropic {
					want, _ = translate.AnthropicStatus(tc.status) // 503 is Anthropic's 529, overloaded
				}
				if w.Code != want || ri.ErrCode != tc.code || ri.Refusal != tc.refusal || ri.ClientClosed != tc.clientGone {
					t.Fatalf("status %d code %q refusal %q gone %v: %s", w.Code, ri.ErrCode, ri.Refusal, ri.ClientClosed, w.Body)
				}
				if (w.Header().Get("Retry-After") != "") != tc.retryAfter {
					t.Fatalf("Retry-After %q", w.Header().Get("Retry-After"))
				}
				shape := `"code":"` + tc.code + `"`
				if anthropic {
					shape = `"type":"error"`
				}
				if !strings.Contains(w.Body.String(), shape) || !c.IsAborted() {
					t.Fatalf("answer %s, aborted %v: want %s", w.Body, c.IsAborted(), shape)
				}
			})
		}
	}
	if _, ok := readJSONBody(func() *gin.Context {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader("{}"))
		c.Request.Header.Set("Content-Encoding", "br")
		return c
	}(), reqbody.Limits{MaxBytes: 1 << 10}); ok {
		t.Fatal("readJSONBody accepted a body reqbody refused")
	}
}
