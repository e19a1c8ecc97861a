package platform

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/config"
)

// upstreamKind is how a test platform serves.
type upstreamKind int

const (
	tlsH2       upstreamKind = iota // TLS offering h2 and http/1.1 by ALPN
	tlsH1                           // TLS offering http/1.1 only
	plainH1                         // plain HTTP/1.1
	plainH2Only                     // HTTP/2 with prior knowledge, nothing else
)

// startUpstream starts a platform of kind k that answers with the protocol each request came
// in on. Its certificate (TLS kinds) is httptest's, which no system trusts.
func startUpstream(t *testing.T, k upstreamKind) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	switch k {
	case tlsH2:
		srv.EnableHTTP2 = true
		srv.StartTLS()
	case tlsH1:
		srv.StartTLS()
	case plainH1:
		srv.Start()
	case plainH2Only:
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// caFileOf writes srv's certificate, its own issuer, as a ca_file would hold it and loads it
// the way main does.
func caFileOf(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	return apitest.TempFile(t, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
}

// TestTransportModes: what each upstream.http2 mode speaks to each kind of platform, with the
// platform's private CA trusted through upstream.tls.ca_file.
func TestTransportModes(t *testing.T) {
	cases := []struct {
		name     string
		upstream upstreamKind
		mode     string
		trustCA  bool
		want     string // the protocol the platform saw
	}{
		{"auto_tls_h2", tlsH2, config.HTTP2Auto, true, "HTTP/2.0"},
		{"empty_is_auto", tlsH2, "", true, "HTTP/2.0"},
		{"auto_tls_without_h2", tlsH1, config.HTTP2Auto, true, "HTTP/1.1"},
		{"auto_plain", plainH1, config.HTTP2Auto, false, "HTTP/1.1"},
		{"off_tls_h2", tlsH2, config.HTTP2Off, true, "HTTP/1.1"},
		{"h2c_prior_knowledge", plainH2Only, config.HTTP2Cleartext, false, "HTTP/2.0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := startUpstream(t, c.upstream)
			opts := TransportOptions{HTTP2: c.mode}
			if c.trustCA {
				pool, err := config.ReadCAFile(caFileOf(t, srv))
				if err != nil {
					t.Fatal(err)
				}
				opts.RootCAs = pool
			}
			tr := NewTransport(opts)
			defer tr.CloseIdleConnections()
			cl, err := New(srv.URL, srv.URL, tr)
			if err != nil {
				t.Fatal(err)
			}
			// Twice: the second call reuses the pooled connection and must speak the same.
			for i := 0; i < 2; i++ {
				req, err := cl.NewGatewayRequest(context.Background(), Call{Method: "POST", Path: ResponsesPath, Body: []byte(`{}`), Key: "k"})
				if err != nil {
					t.Fatal(err)
				}
				resp, err := cl.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(body) != c.want || resp.Proto != c.want {
					t.Fatalf("call %d: platform saw %q, modelgate %q; want %s", i, body, resp.Proto, c.want)
				}
			}
		})
	}
}

// TestUntrustedCertificate: a platform whose certificate chains to no trusted CA is refused
// with an error that names certificate trust (what the operator must fix: upstream.tls.ca_file)
// and says nothing of the platform key that would have been sent. The failure kind in logs
// and metrics is "tls", not a generic one.
func TestUntrustedCertificate(t *testing.T) {
	const secret = "sk-platform-untrusted-0123"
	for _, mode := range []string{config.HTTP2Auto, config.HTTP2Off} {
		t.Run(mode, func(t *testing.T) {
			var hits int
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits++ }))
			srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
			srv.EnableHTTP2 = true
			srv.StartTLS()
			defer srv.Close()
			cl, err := New(srv.URL, srv.URL, NewTransport(TransportOptions{HTTP2: mode}))
			if err != nil {
				t.Fatal(err)
			}
			req, _ := cl.NewGatewayRequest(context.Background(), Call{Method: "POST", Path: ResponsesPath, Body: []byte(`{}`), Key: secret})
			resp, err := cl.Do(req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("an untrusted certificate was accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, "certificate") || !strings.Contains(msg, "unknown authority") {
				t.Errorf("error %q does not name certificate trust", msg)
			}
			if strings.Contains(msg, secret) || strings.Contains(strings.ToLower(msg), "key") {
				t.Errorf("error %q speaks of keys", msg)
			}
			if k := ErrorKind(err); k != "tls" {
				t.Errorf("ErrorKind = %q, want tls", k)
			}
			if hits != 0 {
				t.Errorf("the platform handled %d requests", hits)
			}
		})
	}
}

// alpnWatch counts the TLS handshakes that offer h2 to a test platform, and can make the
// platform answer http/1.1 to them as one without HTTP/2 does.
type alpnWatch struct {
	h2Offers  atomic.Int32
	withoutH2 atomic.Bool
}

// install makes srv (unstarted, EnableHTTP2 set) report its handshakes to w.
func (w *alpnWatch) install(srv *httptest.Server) {
	srv.TLS = &tls.Config{GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if slices.Contains(hello.SupportedProtos, "h2") {
			w.h2Offers.Add(1)
		}
		if !w.withoutH2.Load() {
			return nil, nil
		}
		c := srv.TLS.Clone() // StartTLS's copy, with the certificate
		c.GetConfigForClient = nil
		c.NextProtos = []string{"http/1.1"}
		return c, nil
	}}
}

// alpnPlatform is a TLS platform that echoes each request's protocol and body, watched by
// alpn, and counts the connections it accepted.
type alpnPlatform struct {
	url      string
	roots    *x509.CertPool
	alpn     alpnWatch
	accepted atomic.Int32
}

func startALPNPlatform(t *testing.T, withoutH2 bool) *alpnPlatform {
	t.Helper()
	p := &alpnPlatform{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.Proto+" "+string(body))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			p.accepted.Add(1)
		}
	}
	p.alpn.withoutH2.Store(withoutH2)
	p.alpn.install(srv)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.url = srv.URL
	p.roots = x509.NewCertPool()
	p.roots.AddCert(srv.Certificate())
	return p
}

// pipedBody is a streamed request body (no GetBody) fed through a pipe, as an upload's is:
// once closed it reads nothing more, so a close that came too early shows. It counts closes.
type pipedBody struct {
	*io.PipeReader
	closes atomic.Int32
}

func newPipedBody(content string) *pipedBody {
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, content)
		pw.Close()
	}()
	return &pipedBody{PipeReader: pr}
}

func (b *pipedBody) Close() error { b.closes.Add(1); return b.PipeReader.Close() }

// autoCall sends one call of the given body kind through cl and returns what the platform saw.
func autoCall(t *testing.T, cl *Client, kind string) string {
	t.Helper()
	call := Call{Method: "POST", Path: ResponsesPath, Key: "k"}
	var streamed *pipedBody
	switch kind {
	case "none":
		call.Method = "GET"
	case "bytes":
		call.Body = []byte(`{"kind":"bytes"}`)
	case "streamed":
		streamed = newPipedBody(`{"kind":"streamed"}`)
		call.BodyReader = streamed
	}
	req, err := cl.NewGatewayRequest(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s call: %v", kind, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if streamed != nil && streamed.closes.Load() == 0 {
		t.Errorf("the streamed body was never closed")
	}
	return string(body)
}

// TestAutoWithoutH2: under auto, a TLS platform that negotiates only HTTP/1.1 is offered h2
// once. The request that found out, whatever its body, is sent over HTTP/1.1 whole (nothing
// of it was written on the refused connection), and the later ones go straight to HTTP/1.1
// on one kept-alive connection: two connections in all, one handshake offering h2.
func TestAutoWithoutH2(t *testing.T) {
	want := map[string]string{
		"none":     "HTTP/1.1 ",
		"bytes":    `HTTP/1.1 {"kind":"bytes"}`,
		"streamed": `HTTP/1.1 {"kind":"streamed"}`,
	}
	for _, first := range []string{"none", "bytes", "streamed"} {
		t.Run("first_"+first, func(t *testing.T) {
			p := startALPNPlatform(t, true)
			tr := NewTransport(TransportOptions{HTTP2: config.HTTP2Auto, RootCAs: p.roots})
			defer tr.CloseIdleConnections()
			cl, err := New(p.url, p.url, tr)
			if err != nil {
				t.Fatal(err)
			}
			calls := []string{first, "none", "bytes", "streamed", "none", "bytes", "streamed"}
			for i, kind := range calls {
				if got := autoCall(t, cl, kind); got != want[kind] {
					t.Fatalf("call %d (%s): platform saw %q, want %q", i, kind, got, want[kind])
				}
			}
			if n := p.alpn.h2Offers.Load(); n != 1 {
				t.Errorf("%d handshakes offered h2 over %d calls; want 1", n, len(calls))
			}
			if n := p.accepted.Load(); n != 2 {
				t.Errorf("%d connections over %d sequential calls; want 2 (the one refused, the one kept alive)", n, len(calls))
			}
		})
	}
}

// TestAutoOffersH2Again: a platform recorded without h2 is offered it again once
// noH2Recheck has passed, by one request, so a platform that gains h2 gets HTTP/2; until
// then, and while it still lacks h2, requests stay on HTTP/1.1 without offering it.
func TestAutoOffersH2Again(t *testing.T) {
	p := startALPNPlatform(t, true)
	tr := NewTransport(TransportOptions{HTTP2: config.HTTP2Auto, RootCAs: p.roots})
	defer tr.CloseIdleConnections()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	tr.now = func() time.Time { return time.Unix(0, clock.Load()) }
	cl, err := New(p.url, p.url, tr)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name      string
		advance   time.Duration
		gainsH2   bool
		want      string
		offersNow int32 // handshakes offering h2 so far
	}{
		{"first", 0, false, "HTTP/1.1", 1},
		{"within_recheck", noH2Recheck - time.Minute, false, "HTTP/1.1", 1},
		{"recheck_still_without", 2 * time.Minute, false, "HTTP/1.1", 2},
		{"after_recheck_refused", time.Second, false, "HTTP/1.1", 2},
		{"window_passed_record_fresh", reofferWindow, false, "HTTP/1.1", 2},
		{"gained_but_record_fresh", time.Minute, true, "HTTP/1.1", 2},
		{"recheck_gained", noH2Recheck, true, "HTTP/2.0", 3},
		{"on_h2", time.Second, true, "HTTP/2.0", 3},
		{"on_h2_later", 2 * noH2Recheck, true, "HTTP/2.0", 3},
	}
	for _, s := range steps {
		clock.Add(int64(s.advance))
		p.alpn.withoutH2.Store(!s.gainsH2)
		got := autoCall(t, cl, "bytes")
		if want := s.want + ` {"kind":"bytes"}`; got != want {
			t.Fatalf("%s: platform saw %q, want %q", s.name, got, want)
		}
		if n := p.alpn.h2Offers.Load(); n != s.offersNow {
			t.Fatalf("%s: %d handshakes offered h2 so far, want %d", s.name, n, s.offersNow)
		}
	}
}

// TestReofferOnePerWindow: when a record of no h2 expires, one request takes the turn to
// offer h2 again; the others keep to HTTP/1.1 until reofferWindow has passed.
func TestReofferOnePerWindow(t *testing.T) {
	tr := NewTransport(TransportOptions{})
	var clock atomic.Int64
	clock.Store(int64(time.Hour))
	tr.now = func() time.Time { return time.Unix(0, clock.Load()) }
	tr.markNoH2("platform.example:443")
	v := tr.verdict("platform.example:443")
	cases := []struct {
		advance time.Duration
		want    bool
	}{
		{0, false},
		{noH2Recheck, true},
		{0, false},
		{reofferWindow - time.Second, false},
		{time.Second, true},
	}
	for i, c := range cases {
		clock.Add(int64(c.advance))
		if got := tr.takeReoffer(v); got != c.want {
			t.Errorf("step %d: takeReoffer = %v, want %v", i, got, c.want)
		}
	}
}
