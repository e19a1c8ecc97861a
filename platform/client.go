// Package platform is modelgate's client for the GPU cloud platform: the Responses gateway at
// {gateway_url} and the open API at {base_url}. It builds upstream requests from scratch, so
// nothing a caller sent (headers, hosts, paths) reaches the platform unless modelgate put it
// there on purpose.
package platform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

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
