package cors

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

const page = "http://127.0.0.1:5173"

// TestMain puts gin in release mode once, as main does, so the engines the tests build do
// not print their routes.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}

// serve runs one request through a policy for origins; a request it lets through reaches
// a handler answering 200.
func serve(origins []string, method, path string, hdr ...string) (w *httptest.ResponseRecorder, preflights int) {
	p := New(func() []string { return origins }, []string{"x-own-header"}, func(*gin.Context) { preflights++ })
	w = httptest.NewRecorder()
	c, e := gin.CreateTestContext(w)
	e.Use(p.Handle)
	e.Handle(method, path, func(c *gin.Context) { c.Status(http.StatusOK) })
	c.Request = httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		c.Request.Header.Add(hdr[i], hdr[i+1])
	}
	e.HandleContext(c)
	return w, preflights
}

func TestHandle(t *testing.T) {
	pre := []string{"Origin", page, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "Authorization, X-Stainless-OS, x-evil"}
	for _, tc := range []struct {
		name          string
		origins       []string
		method, path  string
		hdr           []string
		status        int
		allowOrigin   string
		allowHeaders  string
		exposeOwn     bool
		preflightHook int
	}{
		{"preflight", []string{page}, http.MethodOptions, "/v1/chat/completions", pre, 204, page, "authorization, x-stainless-os", false, 1},
		{"preflight_wildcard", []string{"*"}, http.MethodOptions, "/v1/messages", pre, 204, "*", "authorization, x-stainless-os", false, 1},
		{"preflight_other_origin", []string{"http://other"}, http.MethodOptions, "/v1/chat/completions", pre, 403, "", "", false, 1},
		{"call", []string{page}, http.MethodGet, "/v1/models", []string{"Origin", page}, 200, page, "", true, 0},
		{"call_other_origin", []string{"http://other"}, http.MethodGet, "/v1/models", []string{"Origin", page}, 200, "", "", false, 0},
		{"off", nil, http.MethodOptions, "/v1/chat/completions", pre, 200, "", "", false, 0},
		{"admin_never", []string{"*"}, http.MethodOptions, "/admin/keys", pre, 200, "", "", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, hooked := serve(tc.origins, tc.method, tc.path, tc.hdr...)
			h := w.Header()
			if w.Code != tc.status || h.Get("Access-Control-Allow-Origin") != tc.allowOrigin ||
				h.Get("Access-Control-Allow-Headers") != tc.allowHeaders || hooked != tc.preflightHook {
				t.Fatalf("status %d, headers %v, preflight hook %d", w.Code, h, hooked)
			}
			if got := strings.Contains(h.Get("Access-Control-Expose-Headers"), "x-own-header"); got != tc.exposeOwn {
				t.Errorf("exposes the server's own header: %v, want %v (%q)", got, tc.exposeOwn, h.Get("Access-Control-Expose-Headers"))
			}
			if varies := len(h.Values("Vary")) > 0; varies != (len(tc.origins) > 0 && strings.HasPrefix(tc.path, "/v1/")) {
				t.Errorf("Vary %v", h.Values("Vary"))
			}
		})
	}
}

// FuzzAllowHeaders: whatever a preflight asks for, the echoed list holds only allowed
// header names made of token characters, so a page cannot shape the answer's headers.
func FuzzAllowHeaders(f *testing.F) {
	for _, s := range []string{"authorization, content-type", "X-Stainless-OS,x-stainless-arch", "openai-", "x-evil", "openai-a\r\nset-cookie: x", ",,, ,", "OPENAI-PROJECT"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, requested string) {
		out := allowHeaders([]string{requested})
		if out == "" {
			return
		}
		for _, name := range strings.Split(out, ", ") {
			if !headerAllowed(name) || !validHeaderName(name) {
				t.Fatalf("echoed %q for %q", name, requested)
			}
		}
	})
}
