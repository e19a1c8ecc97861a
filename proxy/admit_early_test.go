package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// dialStalled opens a connection and sends a request whose headers promise a body of
// declared bytes, then only the bytes of sent; the body stays stalled while the connection
// is open.
func dialStalled(baseURL, method, path, key string, declared int, sent []byte, hdr ...string) (net.Conn, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, err
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return nil, err
	}
	var head strings.Builder
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n", method, path, u.Host, key)
	if method != http.MethodGet && method != http.MethodDelete {
		fmt.Fprintf(&head, "Content-Length: %d\r\n", declared)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&head, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	head.WriteString("\r\n")
	if _, err := conn.Write(append([]byte(head.String()), sent...)); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// sendStalled is dialStalled, then waits (up to wait) for the answer.
func sendStalled(t testing.TB, baseURL, method, path, key string, declared int, sent []byte, wait time.Duration, hdr ...string) (*http.Response, []byte, error) {
	t.Helper()
	conn, err := dialStalled(baseURL, method, path, key, declared, sent, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// TestKeyAt429RefusedBeforeItsBody: a key out of requests gets its 429 on every route that
// takes a body or reads kept records without a byte of its body being read (the body here
// never arrives, so a handler that reads it first would never answer), in the route's shape.
func TestKeyAt429RefusedBeforeItsBody(t *testing.T) {
	env := newTestEnv(t, limitsYAML, nil)
	for i := range 3 { // alpha-1 may make 3 requests a minute
		if status, _, body := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"hi"}`)); status != 200 {
			t.Fatalf("request %d: %d %s", i, status, body)
		}
	}
	routes := []struct {
		method, path string
		anthropic    bool
	}{
		{"POST", "/v1/chat/completions", false},
		{"POST", "/v1/responses", false},
		{"POST", "/v1/messages", true},
		{"POST", "/v1/messages/count_tokens", true},
		{"POST", "/v1/responses/compact", false},
		{"POST", "/v1/responses/input_tokens", false},
		{"GET", "/v1/responses/resp_abc", false},
		{"DELETE", "/v1/responses/resp_abc", false},
		{"GET", "/v1/responses/resp_abc/input_items", false},
		{"POST", "/v1/responses/resp_abc/cancel", false},
	}
	for _, rt := range routes {
		t.Run(rt.method+rt.path, func(t *testing.T) {
			before := env.upstreamCalls()
			resp, b, err := sendStalled(t, env.front.URL, rt.method, rt.path, keyAlpha1, 1000, nil, 5*time.Second)
			if err != nil {
				t.Fatalf("no answer before the body: %v", err)
			}
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("status %d, Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
			}
			wantShape := `"type":"requests"`
			if rt.anthropic {
				wantShape = `"type":"rate_limit_error"`
			}
			if !strings.Contains(string(b), wantShape) {
				t.Fatalf("not the route's error shape (want %s): %s", wantShape, b)
			}
			if env.upstreamCalls() != before {
				t.Fatal("a refused request reached the platform")
			}
		})
	}
}
