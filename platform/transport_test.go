package platform

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	path := filepath.Join(t.TempDir(), "ca.pem")
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, block, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
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
