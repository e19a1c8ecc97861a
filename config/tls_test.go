package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"modelgate/apitest"
)

// writeCA writes a freshly made self-signed CA certificate as PEM into dir and returns its
// path and the certificate.
func writeCA(t *testing.T, dir string) (string, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "config test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ca.pem")
	apitest.WriteFile(t, path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return path, cert
}

// TestCAFile: upstream.tls.ca_file is read at load; a file that is missing, or holds no
// certificate (a key given by mistake), is a load error naming the key; a good file's CA is in
// the pool.
func TestCAFile(t *testing.T) {
	dir := t.TempDir()
	good, ca := writeCA(t, dir)
	keyOnly := filepath.Join(dir, "key.pem")
	apitest.WriteFile(t, keyOnly, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("not a key")}))
	empty := filepath.Join(dir, "empty.pem")
	apitest.WriteFile(t, empty, nil)
	cases := []struct {
		name, path string
		want       []string // substrings of the load error; none = loads
	}{
		{"missing", filepath.Join(dir, "nope.pem"), []string{"c.yaml:3: upstream.tls.ca_file:", "no such file"}},
		{"key_not_cert", keyOnly, []string{"upstream.tls.ca_file:", "no PEM certificate"}},
		{"empty", empty, []string{"upstream.tls.ca_file:", "no PEM certificate"}},
		{"good", good, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := "upstream:\n  tls:\n    ca_file: " + c.path + "\n"
			cfg, err := Parse([]byte(src), "c.yaml", nil)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Upstream.TLS.CAFile != c.path {
					t.Fatalf("ca_file = %q", cfg.Upstream.TLS.CAFile)
				}
				pool, err := ReadCAFile(c.path)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ca.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
					t.Fatalf("the file's CA is not in the pool: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("loaded; want an error containing %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

// TestHTTP2Values: upstream.http2 takes auto (the default), h2c or off; h2c only with
// http:// URLs, since it has no TLS to speak over.
func TestHTTP2Values(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       string // the value after load
		wantErr    string
	}{
		{"default_auto", "upstream: {}\n", HTTP2Auto, ""},
		{"auto", "upstream:\n  http2: auto\n", HTTP2Auto, ""},
		{"off", "upstream:\n  http2: off\n", HTTP2Off, ""},
		{"h2c_plain", "upstream:\n  http2: h2c\n  gateway_url: http://gw.internal:8080\n  base_url: http://api.internal\n", HTTP2Cleartext, ""},
		{"h2c_https_gateway", "upstream:\n  http2: h2c\n  gateway_url: https://gw.example\n", "", "upstream.http2: h2c is HTTP/2 without TLS, but upstream.gateway_url is https://"},
		{"h2c_https_base", "upstream:\n  http2: h2c\n  base_url: HTTPS://api.example\n", "", "but upstream.base_url is https://"},
		{"unknown", "upstream:\n  http2: h3\n", "", `upstream.http2: want auto, h2c or off, got "h3"`},
		{"wrong_case", "upstream:\n  http2: H2C\n", "", `upstream.http2: want auto, h2c or off, got "H2C"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(c.yaml), "c.yaml", nil)
			if apitest.ErrWanted(t, err, c.wantErr) {
				return
			}
			if cfg.Upstream.HTTP2 != c.want {
				t.Fatalf("http2 = %q, want %q", cfg.Upstream.HTTP2, c.want)
			}
		})
	}
}
