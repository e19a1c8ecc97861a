package platform

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
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
	// WrapDial, when set, interposes on every TCP connection the transport opens, before any
	// TLS: tests count, delay or refuse dials with it. Nil in production.
	WrapDial func(DialFunc) DialFunc
}

// DialFunc opens a connection, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// StreamReceiveWindow is the most response body the transport holds unread for one HTTP/2
// stream: the flow-control window modelgate offers the platform per stream. A client that
// reads slowly stops the relay's reads, the window fills, and the platform pauses that stream
// alone; so this bounds what one slow reader makes modelgate buffer, and other streams on the
// same connection go on. Go's default is 4 MiB per stream.
const StreamReceiveWindow = 256 << 10

// h2DialsAtOnce bounds the connections modelgate dials at once to a platform it speaks HTTP/2
// to (h2c, and TLS under auto). Without it, a burst of streams that finds no connection with
// room (the first burst, or one that fills every connection) dials once per waiting stream,
// and all but a few of those connections are closed unused: 1,000 streams at once dialled
// ~1,000 h2c connections and 1,250-2,650 TLS ones, 5,000 dialled ~3,100 over h2c, each a
// descriptor for a moment. On HTTP/2 net/http stops counting a connection against
// MaxConnsPerHost once it is full, so the bound throttles dials, not streams: 5,000 streams
// still opened the 20 connections a limit of 250 needs, in the same half second, with 184
// dials (TestStreamBurstConnections; docs/performance.md, "HTTP/2 to the platform"). It is
// never set where HTTP/1.1 may be spoken: there each open stream holds a connection, and the
// bound would cap open streams.
const h2DialsAtOnce = 16

// noH2Recheck is how long requests to a TLS platform that did not negotiate h2 go straight to
// HTTP/1.1. Then one request offers h2 again, so a platform that gains it (a new load
// balancer, an upgrade) gets HTTP/2 within this time, at the cost of one extra TLS handshake
// per platform host every five minutes while it does not.
const noH2Recheck = 5 * time.Minute

// reofferWindow is how long the one request that offers h2 again to such a platform has
// before another may; meanwhile the others keep to HTTP/1.1 instead of all dialling at once.
const reofferWindow = 10 * time.Second

// errNoH2 is the HTTP/2 transport's dial refusing a TLS platform that did not negotiate h2.
// It comes before any byte of the request is written, so the request is sent again over
// HTTP/1.1; it never reaches a caller.
var errNoH2 = errors.New("platform: TLS did not negotiate h2")

// Transport is modelgate's http.RoundTripper to the platform, tuned for a proxy: many idle
// connections to the one upstream host, bounded dial and first-byte waits, and no overall
// timeout, because streams may legitimately run for many minutes.
//
// Under upstream.http2 auto it is two transports. https:// requests go to an HTTP/2-only one
// whose dials are bounded (h2DialsAtOnce), so a burst of streams opens the few connections it
// needs instead of one per stream. Its dial offers h2 and http/1.1 by ALPN, as any client
// does, and refuses a platform that picks http/1.1 (errNoH2); the request then goes, as do
// later ones to that host for noH2Recheck, to the HTTP/1.1 transport, which has no dial bound
// because there each open stream holds a connection. http:// requests go there too.
type Transport struct {
	// base carries every request under off and h2c, and under auto the http:// ones and
	// those to a TLS platform that does not negotiate h2.
	base *http.Transport
	// h2 carries https:// requests under auto; nil in the other modes.
	h2 *http.Transport
	// noH2 maps a platform address (lower-case host:port) to its *noH2Verdict, for each one
	// whose TLS did not negotiate h2. Only the platform's configured hosts are addressed, so
	// it holds one or two entries at most; anyNoH2 keeps the lookup off the common path.
	noH2    sync.Map
	anyNoH2 atomic.Bool
	now     func() time.Time
}

// noH2Verdict records that a platform host answered TLS without h2.
type noH2Verdict struct {
	until     atomic.Int64 // unix ns; before it, requests go to HTTP/1.1 without offering h2
	reoffered atomic.Int64 // unix ns when a request last took the turn to offer h2 again
}

// NewTransport returns the transport for upstream.http2 mode o.HTTP2.
func NewTransport(o TransportOptions) *Transport {
	tcp := DialFunc((&net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}).DialContext)
	if o.WrapDial != nil {
		tcp = o.WrapDial(tcp)
	}
	t := &Transport{now: time.Now}
	t.base = newHTTPTransport(o)
	t.base.DialContext = dialAside(tcp)
	t.base.TLSClientConfig = &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}
	t.base.Protocols = new(http.Protocols)
	switch o.HTTP2 {
	case "h2c":
		t.base.Protocols.SetUnencryptedHTTP2(true)
		t.base.MaxConnsPerHost = h2DialsAtOnce
	case "off":
		t.base.Protocols.SetHTTP1(true)
	default: // auto: HTTP/2 where TLS negotiates it, HTTP/1.1 elsewhere
		t.base.Protocols.SetHTTP1(true)
		t.h2 = newHTTPTransport(o)
		t.h2.Protocols = new(http.Protocols)
		t.h2.Protocols.SetHTTP2(true)
		t.h2.MaxConnsPerHost = h2DialsAtOnce
		// The handshake happens in the dial, so net/http's TLSClientConfig and
		// TLSHandshakeTimeout go unused here; the dial applies the same settings.
		offer := &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
		t.h2.DialTLSContext = dialAside(t.dialH2(tcp, offer, o.DialTimeout))
	}
	return t
}

// newHTTPTransport holds the settings every transport to the platform shares.
func newHTTPTransport(o TransportOptions) *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // the platform is addressed directly; environment proxies are not consulted
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   o.DialTimeout,
		ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		// Upstream bodies are forwarded byte for byte; transparent decompression would
		// change them and hide their real size.
		DisableCompression: true,
		// On HTTP/1.1 every open stream holds one upstream connection with these two buffers.
		// A request body larger than the write buffer goes straight to the socket, so 1 KiB,
		// enough for the headers, costs nothing and saves 3 KiB a stream. The read buffer is
		// net/http's 4 KiB: an answer's chunked body is read through it (each chunk's header
		// is), so with 1 KiB every KiB of a burst of events was a read(2) of its own: a short
		// streamed answer (about 3 KiB) took four reads, not one.
		WriteBufferSize: 1 << 10,
		ReadBufferSize:  4 << 10,
		HTTP2: &http.HTTP2Config{
			MaxReceiveBufferPerStream: StreamReceiveWindow,
			MaxEncoderHeaderTableSize: encoderHeaderTable,
			// A connection carries many streams, some silent for minutes while a model
			// thinks: a ping after 30 s of silence finds a dead one before its streams' idle
			// timeouts would.
			SendPingTimeout: 30 * time.Second,
		},
	}
}

// RoundTrip sends req over HTTP/2 or HTTP/1.1 as the mode and the platform allow.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.h2 == nil || req.URL.Scheme != "https" {
		return t.base.RoundTrip(req)
	}
	addr, reoffer := "", false
	if t.anyNoH2.Load() {
		addr = tlsAddr(req.URL)
		if v := t.verdict(addr); v != nil {
			if !t.takeReoffer(v) {
				return t.base.RoundTrip(req)
			}
			reoffer = true
		}
	}
	h2req, held := holdBody(req)
	resp, err := t.h2.RoundTrip(h2req)
	if !errors.Is(err, errNoH2) {
		held.release()
		if err == nil && reoffer {
			t.noH2.Delete(addr) // offered again and negotiated: the platform speaks h2 now
		}
		return resp, err
	}
	if addr == "" {
		addr = tlsAddr(req.URL)
	}
	t.markNoH2(addr) // the dial recorded it too, under net/http's spelling of the address
	again, err := replay(req, held)
	if err != nil {
		return nil, err
	}
	return t.base.RoundTrip(again)
}

// CloseIdleConnections closes the idle connections of both transports.
func (t *Transport) CloseIdleConnections() {
	t.base.CloseIdleConnections()
	if t.h2 != nil {
		t.h2.CloseIdleConnections()
	}
}

// dialH2 returns the HTTP/2 transport's TLS dial: tcp, then a handshake offering h2 and
// http/1.1, as any client's, so a platform without h2 answers http/1.1 rather than failing the
// handshake (offered h2 alone, Go's server refuses it with "no application protocol", and a
// server that ignores ALPN would be sent HTTP/1.1 by an HTTP/2-only net/http transport).
// Anything but h2 is closed and refused with errNoH2, and so is every dial to a host already
// known to lack h2: the requests queued behind the first refusal then fail over at once
// instead of each handshaking in turn.
func (t *Transport) dialH2(tcp DialFunc, offer *tls.Config, handshakeTimeout time.Duration) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if v := t.verdict(strings.ToLower(addr)); v != nil && t.now().UnixNano() < v.until.Load() {
			return nil, errNoH2
		}
		raw, err := tcp(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conf := offer.Clone()
		if conf.ServerName, _, err = net.SplitHostPort(addr); err != nil {
			raw.Close()
			return nil, err
		}
		conn := tls.Client(raw, conf)
		hctx := ctx
		if handshakeTimeout > 0 {
			var cancel context.CancelFunc
			hctx, cancel = context.WithTimeout(ctx, handshakeTimeout)
			defer cancel()
		}
		if err := conn.HandshakeContext(hctx); err != nil {
			raw.Close()
			return nil, err
		}
		if conn.ConnectionState().NegotiatedProtocol != "h2" {
			conn.Close()
			// Recorded here, before net/http starts the next queued dial, not only when
			// the refused request comes back to RoundTrip.
			t.markNoH2(strings.ToLower(addr))
			return nil, errNoH2
		}
		return conn, nil
	}
}

// verdict is addr's record of lacking h2, or nil.
func (t *Transport) verdict(addr string) *noH2Verdict {
	if !t.anyNoH2.Load() {
		return nil
	}
	v, _ := t.noH2.Load(addr)
	verdict, _ := v.(*noH2Verdict)
	return verdict
}

// markNoH2 records that addr's TLS did not negotiate h2, now.
func (t *Transport) markNoH2(addr string) {
	v, _ := t.noH2.LoadOrStore(addr, new(noH2Verdict))
	v.(*noH2Verdict).until.Store(t.now().Add(noH2Recheck).UnixNano())
	t.anyNoH2.Store(true)
}

// takeReoffer reports whether this request should offer h2 to a host recorded without it:
// only once the record is noH2Recheck old, and only one request per reofferWindow.
func (t *Transport) takeReoffer(v *noH2Verdict) bool {
	now := t.now().UnixNano()
	if now < v.until.Load() {
		return false
	}
	last := v.reoffered.Load()
	if now-last < int64(reofferWindow) {
		return false
	}
	return v.reoffered.CompareAndSwap(last, now)
}

// tlsAddr is u's host:port as net/http dials it for https, lower case.
func tlsAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}

// dialAside returns dial run on a goroutine of its own. net/http calls its dial functions on a
// goroutine that is already 1.7 KB deep (its dialConn frame alone is 1.3 KB), and net.Dialer
// goes 3 KB deeper (resolving, connecting, arming the connect deadline), so that goroutine
// grows to an 8 KB stack for the dial and exits. Its freed slot is stranded among the 8 KB
// stacks of the handlers holding streams open, which are allocated in the same burst: with
// 1,000 streams opened at once, 2.5-2.8 MB of them stayed free but resident, the same in
// httputil.ReverseProxy. On a fresh goroutine the dial nearly always fits a 4 KB stack (0.1
// MB of 8 KB slots left free in the same burst, bench/tools/stacks.py), and net/http's
// goroutine only waits. It costs one goroutine per new upstream connection; pooled ones are
// reused without a dial. The TLS dial under auto handshakes on the same fresh goroutine.
// TestDialAsideKeepsTheCallersStack holds net/http's side.
func dialAside(dial DialFunc) DialFunc {
	type dialed struct {
		conn net.Conn
		err  error
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ch := make(chan dialed, 1)
		go func() {
			c, err := dial(ctx, network, addr)
			ch <- dialed{c, err}
		}()
		r := <-ch // the dial itself honours ctx and the dial timeout
		return r.conn, r.err
	}
}

// encoderHeaderTable turns off HPACK's dynamic table for the headers modelgate sends (1 byte
// holds no entry; 0 would mean Go's default of 4 KiB). Every call carries a header unique to
// it, X-Request-Id, and net/http indexes every header it may: each call's id then enters the
// table and evicts the oldest entries, and eviction shifts the whole table. On HTTP/2 that
// was 6% of modelgate's CPU on small calls. The headers that repeat (the key, the type, the
// user agent) then go literally, Huffman-coded: some 100 bytes a call on a connection that
// carries kilobytes.
const encoderHeaderTable = 1
