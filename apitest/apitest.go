// Package apitest sends requests to a modelgate under test the way its clients do: a
// bearer key, a JSON content type, and the whole answer read back (or, for requests no
// client would send, the bytes written by hand). It also holds what the test environments
// would otherwise each write again: a locked buffer for logs, canary platform keys, the
// config head of a simulated platform, a test rerun in a child process. The proxy's, the
// admin API's and the end-to-end environments share it; it imports nothing of modelgate,
// so any test package can use it without an import cycle.
package apitest

import (
	"context"
	"io"
	"net/http"
	"testing"
)

// Do sends method url with body, key as bearer token (none when empty) and hdr as
// name/value pairs set after the defaults, and returns status, headers and body. Any
// transport failure fails the test.
func Do(t testing.TB, method, url, key string, body io.Reader, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	return DoContext(t, context.Background(), method, url, key, body, hdr...)
}

// DoContext is Do bounded by ctx: a test that must not hang on a stuck answer passes one
// with a deadline.
func DoContext(t testing.TB, ctx context.Context, method, url, key string, body io.Reader, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	return Send(t, http.DefaultClient, NewRequest(t, ctx, method, url, key, body, hdr...))
}

// Send sends req with client and returns status, headers and the whole body. Any transport
// failure fails the test.
func Send(t testing.TB, client *http.Client, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// NewRequest builds the request Do sends, for a test that sends it with its own client or
// reads the answer as a stream: key as bearer token (none when empty), a JSON content type,
// then hdr as name/value pairs.
func NewRequest(t testing.TB, ctx context.Context, method, url, key string, body io.Reader, hdr ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}
