package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exporter sends spans to an OTLP/HTTP collector as http/protobuf, configured by the same
// OTEL_EXPORTER_OTLP_* variables as OpenTelemetry's own exporter (see encode.go for why it
// is not that one). A batch that fails is reported and dropped, not retried: the next
// batch follows within OTEL_BSP_SCHEDULE_DELAY.
type exporter struct {
	url       string
	headers   http.Header
	gzip      bool
	timeout   time.Duration
	client    *http.Client
	transport *http.Transport

	mu      sync.Mutex // one export at a time: the buffers are reused
	enc     encoder
	body    []byte
	zbuf    bytes.Buffer
	zw      *gzip.Writer
	stopped bool
}

// exporterConfig is what the environment says about the exporter.
type exporterConfig struct {
	url      string
	headers  http.Header
	gzip     bool
	timeout  time.Duration
	tls      *tls.Config
	protocol string
}

// signalEnv reads OTEL_EXPORTER_OTLP_TRACES_<name>, or else OTEL_EXPORTER_OTLP_<name>, and
// names the variable it took.
func signalEnv(getenv func(string) string, name string) (value, variable string) {
	if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_" + name)); v != "" {
		return v, "OTEL_EXPORTER_OTLP_TRACES_" + name
	}
	return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name)), "OTEL_EXPORTER_OTLP_" + name
}

// readExporterConfig reads and checks the exporter's variables; an error names the variable.
func readExporterConfig(getenv func(string) string, readFile func(string) ([]byte, error)) (exporterConfig, error) {
	c := exporterConfig{timeout: 10 * time.Second, protocol: "http/protobuf"}
	// The per-signal endpoint is the URL as given; the general one is a base to which the
	// traces path is added.
	if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); v != "" {
		u, err := endpointURL(v)
		if err != nil {
			return c, fmt.Errorf("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: %w", err)
		}
		if u.Path == "" {
			u.Path = "/"
		}
		c.url = u.String()
	} else if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); v != "" {
		u, err := endpointURL(v)
		if err != nil {
			return c, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
		}
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		c.url = u.String()
	} else {
		return c, errors.New("no OTLP endpoint: set OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	}
	if v, name := signalEnv(getenv, "PROTOCOL"); v != "" && v != "http/protobuf" {
		return c, fmt.Errorf("%s=%q is not supported; modelgate exports OTLP over HTTP as http/protobuf", name, v)
	}
	if v, name := signalEnv(getenv, "HEADERS"); v != "" {
		h, err := parseHeaders(v)
		if err != nil {
			return c, fmt.Errorf("%s: %w", name, err)
		}
		c.headers = h
	}
	if v, name := signalEnv(getenv, "TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive number of milliseconds", name, v)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	switch v, name := signalEnv(getenv, "COMPRESSION"); v {
	case "", "none":
	case "gzip":
		c.gzip = true
	default:
		return c, fmt.Errorf("%s=%q: want gzip or none", name, v)
	}
	tlsConf, err := readTLS(getenv, readFile)
	if err != nil {
		return c, err
	}
	c.tls = tlsConf
	return c, nil
}

func endpointURL(v string) (*url.URL, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("want an http(s) URL such as http://collector:4318, got %q", v)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("the URL must have no query or fragment")
	}
	return u, nil
}

// parseHeaders reads "key1=value1,key2=value2", values percent-encoded as in the W3C
// baggage header the specification borrows the format from.
func parseHeaders(v string) (http.Header, error) {
	h := http.Header{}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, val, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, errors.New("want key=value pairs separated by commas")
		}
		key, err1 := url.PathUnescape(k)
		value, err2 := url.PathUnescape(strings.TrimSpace(val))
		if err1 != nil || err2 != nil || !validHeaderName(key) || strings.ContainsAny(value, "\r\n\x00") {
			return nil, errors.New("a header name or value is not valid")
		}
		h.Add(key, value)
	}
	return h, nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// readTLS builds the TLS settings from the certificate variables, nil when none is set.
func readTLS(getenv func(string) string, readFile func(string) ([]byte, error)) (*tls.Config, error) {
	ca, caName := signalEnv(getenv, "CERTIFICATE")
	cert, certName := signalEnv(getenv, "CLIENT_CERTIFICATE")
	key, keyName := signalEnv(getenv, "CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := readFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", caName, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate in %s", caName, ca)
		}
		conf.RootCAs = pool
	}
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("%s and %s go together", certName, keyName)
	}
	if cert != "" {
		certPEM, err := readFile(cert)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", certName, err)
		}
		keyPEM, err := readFile(key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keyName, err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", certName, keyName, err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}

func newExporter(getenv func(string) string, version string) (*exporter, error) {
	c, err := readExporterConfig(getenv, os.ReadFile)
	if err != nil {
		return nil, err
	}
	// A transport of its own: modelgate's platform transport must not carry telemetry, and
	// a collector behind an egress proxy is reached through it, as other exporters do.
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		TLSClientConfig:       c.tls,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: c.timeout,
	}
	h := http.Header{}
	for k, vs := range c.headers {
		h[k] = vs
	}
	h.Set("Content-Type", "application/x-protobuf")
	h.Set("User-Agent", "modelgate/"+version)
	if c.gzip {
		h.Set("Content-Encoding", "gzip")
	}
	return &exporter{url: c.url, headers: h, gzip: c.gzip, timeout: c.timeout, transport: t,
		client: &http.Client{Transport: t, Timeout: c.timeout}}, nil
}

// ExportSpans sends one batch. It implements sdktrace.SpanExporter.
func (x *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.stopped {
		return nil
	}
	x.body = x.enc.encodeRequest(x.body[:0], spans)
	payload := x.body
	if x.gzip {
		x.zbuf.Reset()
		if x.zw == nil {
			x.zw = gzip.NewWriter(&x.zbuf)
		} else {
			x.zw.Reset(&x.zbuf)
		}
		_, _ = x.zw.Write(x.body)
		if err := x.zw.Close(); err != nil {
			return fmt.Errorf("traces export: gzip: %w", err)
		}
		payload = x.zbuf.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, x.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.url, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	req.Header = x.headers.Clone()
	resp, err := x.client.Do(req)
	if err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("traces export: the collector at %s answered %s; %d spans dropped", x.url, resp.Status, len(spans))
	}
	// Large buffers from a rare huge batch are not kept.
	if cap(x.body) > 4<<20 {
		x.body = nil
	}
	return nil
}

// Shutdown stops exporting and closes idle connections. It implements sdktrace.SpanExporter.
func (x *exporter) Shutdown(ctx context.Context) error {
	x.mu.Lock()
	x.stopped = true
	x.mu.Unlock()
	x.transport.CloseIdleConnections()
	return ctx.Err()
}
