// Package platform is modelgate's client for the GPU cloud platform: the Responses gateway at
// {gateway_url} and the open API at {base_url}. It builds upstream requests from scratch, so
// nothing a caller sent (headers, hosts, paths) reaches the platform unless modelgate put it
// there on purpose.
package platform

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// TransportOptions tune the one shared transport.
type TransportOptions struct {
	DialTimeout           time.Duration
	ResponseHeaderTimeout time.Duration
	// HTTP2 is upstream.http2: "auto" (or empty), "h2c" or "off".
	HTTP2 string
	// RootCAs, when set, is the pool the platform's certificate must chain to
	// (upstream.tls.ca_file's, which includes the system roots); nil means the system roots.
	RootCAs *x509.CertPool
}

// StreamReceiveWindow is the most response body the transport holds unread for one HTTP/2
// stream: the flow-control window modelgate offers the platform per stream. A client that
// reads slowly stops the relay's reads, the window fills, and the platform pauses that stream
// alone; so this bounds what one slow reader makes modelgate buffer, and other streams on the
// same connection go on. Go's default is 4 MiB per stream.
const StreamReceiveWindow = 256 << 10

// NewTransport returns a transport tuned for a proxy: many idle connections to the one upstream
// host, bounded dial and first-byte waits, and no overall timeout, because streams may
// legitimately run for many minutes.
func NewTransport(o TransportOptions) *http.Transport {
	dialer := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 nil, // the platform is addressed directly; environment proxies are not consulted
		DialContext:           dialAside(dialer),
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   o.DialTimeout,
		ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		// Upstream bodies are forwarded byte for byte; transparent decompression would
		// change them and hide their real size.
		DisableCompression: true,
		// Every open stream holds one upstream connection with these two buffers. Bodies
		// bypass them (reads and writes larger than the buffer go straight to the socket),
		// so 1 KiB, enough for headers, costs nothing in throughput and saves ~6 KiB a stream.
		WriteBufferSize: 1 << 10,
		ReadBufferSize:  1 << 10,
		TLSClientConfig: &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12},
		Protocols:       protocols(o.HTTP2),
		MaxConnsPerHost: maxConnsPerHost(o.HTTP2),
		HTTP2: &http.HTTP2Config{
			MaxReceiveBufferPerStream: StreamReceiveWindow,
			// A connection carries many streams, some silent for minutes while a model
			// thinks: a ping after 30 s of silence finds a dead one before its streams' idle
			// timeouts would.
			SendPingTimeout: 30 * time.Second,
		},
	}
}

// h2cDialsAtOnce bounds the connections an h2c transport dials to the platform at once.
// Without it, a burst of streams that finds no connection with room (the first burst, or one
// that fills every connection) dials once per waiting stream, and all but a few of those
// connections are closed unused: 1,000 streams at once dialled ~1,000 connections, 5,000 dialled
// ~3,100, each a descriptor for a moment. On HTTP/2 net/http stops counting a connection
// against MaxConnsPerHost once it is full, so the bound throttles dials, not streams: 5,000
// streams still opened the 20 connections a limit of 250 needs, in the same half second, with
// 184 dials (TestStreamBurstConnections; docs/performance.md, "HTTP/2 to the platform").
const h2cDialsAtOnce = 16

// maxConnsPerHost is http.Transport.MaxConnsPerHost for upstream.http2 mode. Only h2c sets
// it: there every connection is HTTP/2. Under auto a platform may answer HTTP/1.1, where each
// open stream holds a connection and the same bound would cap open streams at 16.
func maxConnsPerHost(mode string) int {
	if mode == "h2c" {
		return h2cDialsAtOnce
	}
	return 0
}

// protocols maps upstream.http2 to what the transport may speak.
func protocols(mode string) *http.Protocols {
	p := new(http.Protocols)
	switch mode {
	case "h2c":
		p.SetUnencryptedHTTP2(true)
	case "off":
		p.SetHTTP1(true)
	default: // auto: HTTP/2 where TLS negotiates it, HTTP/1.1 elsewhere
		p.SetHTTP1(true)
		p.SetHTTP2(true)
	}
	return p
}

// dialAside returns d.DialContext run on a goroutine of its own. net/http calls DialContext on
// a goroutine that is already 1.7 KB deep (its dialConn frame alone is 1.3 KB), and net.Dialer
// goes 3 KB deeper (resolving, connecting, arming the connect deadline), so that goroutine
// grows to an 8 KB stack for the dial and exits. Its freed slot is stranded among the 8 KB
// stacks of the handlers holding streams open, which are allocated in the same burst: with
// 1,000 streams opened at once, 2.5-2.8 MB of them stayed free but resident, the same in
// httputil.ReverseProxy. On a fresh goroutine the dial nearly always fits a 4 KB stack (0.1
// MB of 8 KB slots left free in the same burst, bench/tools/stacks.py), and net/http's
// goroutine only waits. It costs one goroutine per new upstream connection; pooled ones are
// reused without a dial. TestDialAsideKeepsTheCallersStack holds net/http's side.
func dialAside(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	type dialed struct {
		conn net.Conn
		err  error
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ch := make(chan dialed, 1)
		go func() {
			c, err := d.DialContext(ctx, network, addr)
			ch <- dialed{c, err}
		}()
		r := <-ch // the dial itself honours ctx and the dial timeout
		return r.conn, r.err
	}
}

// Client addresses the platform. It is safe for concurrent use.
type Client struct {
	gateway   *url.URL
	base      *url.URL
	transport http.RoundTripper
	// gatewayResponses is {gateway_url}/v1/responses, spelled once: the hot route builds its
	// requests without joining, escaping and printing a URL each time.
	gatewayResponses string
	// userAgent is "modelgate/<version>", one read-only slice shared by every request.
	userAgent []string
}

// Option adjusts a Client built by New.
type Option func(*Client)

// WithVersion names the build in the User-Agent of every call ("modelgate/<version>");
// without it the client says "modelgate/dev".
func WithVersion(version string) Option {
	return func(c *Client) { c.userAgent = []string{"modelgate/" + version} }
}

// New checks the two base addresses and returns a client using transport t.
func New(gatewayURL, baseURL string, t http.RoundTripper, opts ...Option) (*Client, error) {
	g, err := parseBase("gateway_url", gatewayURL)
	if err != nil {
		return nil, err
	}
	b, err := parseBase("base_url", baseURL)
	if err != nil {
		return nil, err
	}
	responses, err := joinURL(g, Call{Path: ResponsesPath})
	if err != nil {
		return nil, err
	}
	c := &Client{
		gateway:          g,
		base:             b,
		gatewayResponses: responses,
		transport:        t,
		userAgent:        []string{"modelgate/dev"},
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Do sends one request and returns the platform's answer, whatever its status. It goes
// straight to the transport: a redirect is returned, never followed, so the credential is
// never sent to a host the platform names, and deadlines come from each request's context.
// That leaves http.Client nothing to do but copy every request's headers for redirects it
// would not follow.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	return c.transport.RoundTrip(req)
}

// CloseIdleConnections closes the transport's idle connections.
func (c *Client) CloseIdleConnections() {
	if t, ok := c.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

func parseBase(name, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("platform: %s must be an absolute http(s) URL", name)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u, nil
}

// GatewayAddr is the gateway's host:port, for readiness probes.
func (c *Client) GatewayAddr() string { return dialAddr(c.gateway) }

func dialAddr(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Call is one upstream request. Body is held as bytes so that a retry can send it again.
type Call struct {
	Method      string
	Path        string // a constant path, or one built with segments escaped by the caller
	Query       url.Values
	Body        []byte
	BodyReader  io.Reader // streamed body (uploads); never retried
	ContentType string
	Accept      string
	Key         string // platform credential
	RequestID   string
}

// ResponsesPath is the gateway route modelgate speaks to.
const ResponsesPath = "/v1/responses"

// NewGatewayRequest builds a request to {gateway_url}+c.Path.
func (c *Client) NewGatewayRequest(ctx context.Context, call Call) (*http.Request, error) {
	return c.newRequest(ctx, c.gateway, call)
}

// NewOpenAPIRequest builds a request to {base_url}+c.Path.
func (c *Client) NewOpenAPIRequest(ctx context.Context, call Call) (*http.Request, error) {
	return c.newRequest(ctx, c.base, call)
}

func (c *Client) newRequest(ctx context.Context, base *url.URL, call Call) (*http.Request, error) {
	var target string
	if base == c.gateway && call.Path == ResponsesPath && len(call.Query) == 0 {
		target = c.gatewayResponses
	} else {
		var err error
		if target, err = joinURL(base, call); err != nil {
			return nil, err
		}
	}
	var body io.Reader
	switch {
	case call.BodyReader != nil:
		body = call.BodyReader
	case call.Body != nil:
		body = bytes.NewReader(call.Body)
	}
	req, err := http.NewRequestWithContext(ctx, call.Method, target, body)
	if err != nil {
		return nil, fmt.Errorf("platform: build request: %w", err)
	}
	if call.BodyReader != nil {
		req.ContentLength = -1
	}
	// The header map is filled directly with canonical names; constant values share one
	// read-only slice instead of a fresh one per request.
	h := req.Header
	h["User-Agent"] = c.userAgent
	if call.ContentType != "" {
		h["Content-Type"] = constValue(call.ContentType)
	}
	if call.Accept != "" {
		h["Accept"] = constValue(call.Accept)
	}
	if call.RequestID != "" {
		h["X-Request-Id"] = []string{call.RequestID}
	}
	if call.Key != "" {
		h["Authorization"] = []string{"Bearer " + call.Key}
	}
	return req, nil
}

// joinURL is base plus the call's path and query.
func joinURL(base *url.URL, call Call) (string, error) {
	if !strings.HasPrefix(call.Path, "/") {
		return "", errors.New("platform: path must be absolute")
	}
	u := *base
	// Path holds already-escaped segments; set both forms so nothing is re-encoded or decoded.
	unescaped, err := url.PathUnescape(call.Path)
	if err != nil {
		return "", fmt.Errorf("platform: bad path: %w", err)
	}
	u.Path = base.Path + unescaped
	u.RawPath = base.EscapedPath() + call.Path
	if len(call.Query) > 0 {
		u.RawQuery = call.Query.Encode()
	}
	return u.String(), nil
}

var (
	jsonValue  = []string{"application/json"}
	eventValue = []string{"text/event-stream"}
)

func constValue(v string) []string {
	switch v {
	case "application/json":
		return jsonValue
	case "text/event-stream":
		return eventValue
	}
	return []string{v}
}
