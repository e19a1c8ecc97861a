package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"modelgate/platformsim"
)

// upstreamMode is how the proxies under test speak to the benchmark upstream, one of the
// values of --upstream: "h1" plain HTTP/1.1, "h2" TLS offering h2 by ALPN (the certificate
// made at start), "h2c" HTTP/2 with prior knowledge over plain TCP.
type upstreamMode struct {
	name               string
	caFile, cert, key  string // h2: the throwaway CA and the server's certificate (platformsim.NewCertificate)
	rootCAs            *x509.CertPool
	modelgateHTTP2     string // upstream.http2 in modelgate's config and the floor's --upstream-http2
	descriptorsPerPair int    // descriptors a proxy holds per open client stream: its client's, plus one upstream connection on h1
}

// parseModes reads --upstream: one mode or a comma list, each at most once.
func parseModes(s string) ([]string, error) {
	var out []string
	for m := range strings.SplitSeq(s, ",") {
		m = strings.TrimSpace(m)
		switch m {
		case "":
			continue
		case "h1", "h2", "h2c":
		default:
			return nil, fmt.Errorf("--upstream: want h1, h2 or h2c (or a comma list), got %q", m)
		}
		for _, seen := range out {
			if seen == m {
				return nil, fmt.Errorf("--upstream: %s named twice", m)
			}
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--upstream: no mode")
	}
	return out, nil
}

// newUpstreamMode prepares mode name: for h2 a certificate in dir, made now.
func newUpstreamMode(name, dir string) (*upstreamMode, error) {
	m := &upstreamMode{name: name, modelgateHTTP2: "auto", descriptorsPerPair: 1}
	switch name {
	case "h1":
		m.descriptorsPerPair = 2
	case "h2c":
		m.modelgateHTTP2 = "h2c"
	case "h2":
		c, err := platformsim.NewCertificate()
		if err != nil {
			return nil, err
		}
		m.caFile, m.cert, m.key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		for _, f := range []struct {
			path string
			pem  []byte
		}{{m.caFile, c.CAPEM}, {m.cert, c.CertPEM}, {m.key, c.KeyPEM}} {
			if err := os.WriteFile(f.path, f.pem, 0o600); err != nil {
				return nil, err
			}
		}
		m.rootCAs = x509.NewCertPool()
		m.rootCAs.AppendCertsFromPEM(c.CAPEM)
	}
	return m, nil
}

// benchupArgs are the flags that make a benchup serve this mode.
func (m *upstreamMode) benchupArgs() []string {
	args := []string{"--serve", m.name}
	if m.name == "h2" {
		args = append(args, "--tls-cert", m.cert, "--tls-key", m.key)
	}
	return args
}

// floorArgs are the floor's flags for an upstream at url in this mode.
func (m *upstreamMode) floorArgs(url string) []string {
	args := []string{"--upstream", url, "--key", platformKey, "--upstream-http2", m.modelgateHTTP2}
	if m.caFile != "" {
		args = append(args, "--upstream-ca", m.caFile)
	}
	return args
}

// modelgateYAML is the part of modelgate's upstream block that says how to reach the
// upstream in this mode; it goes under "upstream:".
func (m *upstreamMode) modelgateYAML() string {
	s := "  http2: " + m.modelgateHTTP2 + "\n"
	if m.caFile != "" {
		s += "  tls:\n    ca_file: " + m.caFile + "\n"
	}
	return s
}

// tracingEnv is what a traced modelgate needs to export to the upstream in this mode.
func (m *upstreamMode) tracingEnv() []string {
	if m.caFile == "" {
		return nil
	}
	return []string{"OTEL_EXPORTER_OTLP_CERTIFICATE=" + m.caFile}
}

// directTransport is the driver's own transport for calling the upstream directly, speaking
// the mode's protocol as modelgate's transport does.
func (m *upstreamMode) directTransport(conns int) *http.Transport {
	t := &http.Transport{MaxIdleConnsPerHost: conns, DisableCompression: true, Protocols: new(http.Protocols)}
	switch m.name {
	case "h2c":
		t.Protocols.SetUnencryptedHTTP2(true)
	case "h2":
		t.TLSClientConfig = &tls.Config{RootCAs: m.rootCAs, MinVersion: tls.VersionTLS12}
		t.Protocols.SetHTTP1(true)
		t.Protocols.SetHTTP2(true)
	default:
		t.Protocols.SetHTTP1(true)
	}
	return t
}

// raiseFileLimit lifts the driver's soft descriptor limit to the hard one: it holds one
// descriptor per open stream, and the memory phase opens up to 10,000. It returns the limit.
func raiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, err
		}
	}
	return lim.Cur, nil
}

// modeDir is where one mode's configs, certificate and logs go.
func modeDir(work, mode string) (string, error) {
	d := filepath.Join(work, mode)
	return d, os.MkdirAll(d, 0o700)
}
