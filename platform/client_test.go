package platform

import (
	"context"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime/debug"
	"testing"
	"time"
	"unsafe"
)

func TestNewRejectsBadBases(t *testing.T) {
	tests := []struct {
		name, gateway, base string
	}{
		{"relative_gateway", "/v1", "http://h"},
		{"ftp_base", "http://h", "ftp://h"},
		{"no_host", "http://", "http://h"},
		{"garbage", "::", "http://h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.gateway, tt.base, http.DefaultTransport); err == nil {
				t.Fatalf("New(%q, %q) accepted a bad base", tt.gateway, tt.base)
			}
		})
	}
}

func TestRequestBuilding(t *testing.T) {
	c, err := New("https://gw.example/prefix/", "http://api.example:8081", http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		gateway  bool
		call     Call
		wantURL  string
		wantAuth string
	}{
		{
			name: "responses", gateway: true,
			call:    Call{Method: "POST", Path: ResponsesPath, Body: []byte(`{}`), Key: "k1", RequestID: "r1"},
			wantURL: "https://gw.example/prefix/v1/responses", wantAuth: "Bearer k1",
		},
		{
			name:    "escaped_segment_stays_escaped",
			call:    Call{Method: "GET", Path: "/api/open/v2/assets/" + url.PathEscape("a/../b"), Key: "k2"},
			wantURL: "http://api.example:8081/api/open/v2/assets/a%2F..%2Fb", wantAuth: "Bearer k2",
		},
		{
			name:    "query_rebuilt",
			call:    Call{Method: "GET", Path: "/api/open/v2/model-runs/list", Query: url.Values{"page": {"2"}, "status": {"running"}}},
			wantURL: "http://api.example:8081/api/open/v2/model-runs/list?page=2&status=running",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			build := c.NewOpenAPIRequest
			if tt.gateway {
				build = c.NewGatewayRequest
			}
			req, err := build(context.Background(), tt.call)
			if err != nil {
				t.Fatal(err)
			}
			if got := req.URL.String(); got != tt.wantURL {
				t.Errorf("URL = %s, want %s", got, tt.wantURL)
			}
			if got := req.Header.Get("Authorization"); got != tt.wantAuth {
				t.Errorf("Authorization = %q, want %q", got, tt.wantAuth)
			}
			if tt.call.RequestID != "" && req.Header.Get("X-Request-Id") != tt.call.RequestID {
				t.Errorf("X-Request-Id not set")
			}
		})
	}
}

func TestRelativePathRefused(t *testing.T) {
	c, _ := New("http://gw", "http://api", http.DefaultTransport)
	if _, err := c.NewOpenAPIRequest(context.Background(), Call{Method: "GET", Path: "api/open"}); err == nil {
		t.Fatal("a path without a leading slash was accepted")
	}
}

// A redirect from the platform must not carry the credential to the host it names.
func TestRedirectsNotFollowed(t *testing.T) {
	var hits int
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer other.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusFound)
	}))
	defer up.Close()
	c, err := New(up.URL, up.URL, NewTransport(TransportOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := c.NewOpenAPIRequest(context.Background(), Call{Method: "GET", Path: "/api/open/v2/balance/info", Key: "secret"})
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || hits != 0 {
		t.Fatalf("status %d, redirect target hit %d times; want 302 and 0", resp.StatusCode, hits)
	}
}

func TestParseError(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantCode int
		wantMsg  string
		wantOK   bool
	}{
		{"envelope", `{"code":1,"msg":"task not found"}`, 1, "task not found", true},
		{"envelope_negative", `{"code":-2,"msg":"system exception","data":null}`, -2, "system exception", true},
		{"alternative", `{"code":400,"message":"missing run_id","data":{"error":"bad","field":"run_id"}}`, 400, "missing run_id", true},
		{"alternative_string_code", `{"code":"E1","message":"x"}`, CodeFailure, "x", true},
		{"html", `<html>502</html>`, 0, "", false},
		{"no_code", `{"error":{"message":"x"}}`, 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, msg, ok := ParseError([]byte(tt.body))
			if code != tt.wantCode || msg != tt.wantMsg || ok != tt.wantOK {
				t.Errorf("ParseError = (%d, %q, %v), want (%d, %q, %v)", code, msg, ok, tt.wantCode, tt.wantMsg, tt.wantOK)
			}
		})
	}
}

// TestDialAsideKeepsTheCallersStack: net/http calls DialContext (and, for https under auto,
// DialTLSContext) from a goroutine already about 1.7 KB deep, and the dial, handshake
// included, must not grow that goroutine's stack past 4 KB (see dialAside).
func TestDialAsideKeepsTheCallersStack(t *testing.T) {
	if raceEnabled {
		// Instrumented frames are larger and the budget is about the binary as shipped;
		// under -race the dial's wait grew the stack about one run in 60.
		t.Skip("the 4 KB budget is checked without the race detector, like TestOpenStreamStack's")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	h2 := startUpstream(t, tlsH2)
	roots := x509.NewCertPool()
	roots.AddCert(h2.Certificate())
	tr := NewTransport(TransportOptions{DialTimeout: 5 * time.Second, RootCAs: roots})
	cases := []struct {
		name string
		dial func(context.Context, string, string) (net.Conn, error)
		addr string
	}{
		{"tcp", tr.base.DialContext, ln.Addr().String()},
		{"tls_h2", tr.h2.DialTLSContext, h2.Listener.Addr().String()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A moved stack means grown only while no collection runs: a collection may
			// shrink a goroutine's stack, which moves it too (under -race and load, about one
			// run in 200).
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			moved := make(chan bool)
			go func() { moved <- dialMovesStack(t, c.dial, c.addr) }()
			if <-moved {
				t.Fatal("dialling grew the calling goroutine's stack past 4 KB")
			}
		})
	}
}

var padIndex int

// dialMovesStack sits as deep as net/http's dialing goroutine does when it calls DialContext
// (a fresh goroutine grows to 4 KB to enter it), dials, and reports whether the stack was
// moved meanwhile, which the runtime does only to grow (or shrink) it.
//
//go:noinline
func dialMovesStack(t *testing.T, dial func(context.Context, string, string) (net.Conn, error), addr string) bool {
	var pad [1500]byte
	before := uintptr(unsafe.Pointer(&pad[padIndex]))
	c, err := dial(context.Background(), "tcp", addr)
	moved := uintptr(unsafe.Pointer(&pad[padIndex])) != before || pad[padIndex] != 0
	// Closed after the measure: closing a TLS connection writes an alert, which net/http's
	// dialling goroutine never does.
	if err != nil {
		t.Errorf("dial: %v", err)
	} else {
		c.Close()
	}
	return moved
}

// TestUserAgentPerClient: each client names the build it was given, so two clients in one
// process (a test binary, an embedding) never see each other's version.
func TestUserAgentPerClient(t *testing.T) {
	cases := []struct {
		name string
		opts []Option
		want string
	}{
		{"default", nil, "modelgate/dev"},
		{"release", []Option{WithVersion("1.4.2")}, "modelgate/1.4.2"},
		{"other", []Option{WithVersion("2.0.0-rc1")}, "modelgate/2.0.0-rc1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New("http://gw.example", "http://api.example", http.DefaultTransport, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			req, err := c.NewOpenAPIRequest(context.Background(), Call{Method: http.MethodGet, Path: "/api/open/v2/balance/info"})
			if err != nil {
				t.Fatal(err)
			}
			if got := req.Header.Get("User-Agent"); got != tc.want {
				t.Errorf("User-Agent %q, want %q", got, tc.want)
			}
		})
	}
}
