package platformsim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// The protocols Serve can speak, as --simulate-upstream names them.
const (
	ServeH1  = "h1"  // plain HTTP/1.1, the default
	ServeH2  = "h2"  // TLS offering h2 and http/1.1 by ALPN, with a certificate made at start
	ServeH2C = "h2c" // cleartext HTTP/2 with prior knowledge, and nothing else
)

// ServeOptions shape a served Sim.
type ServeOptions struct {
	// Protocol is ServeH1 (or empty), ServeH2 or ServeH2C.
	Protocol string
	// FirstRequest, when set, is called once for each protocol ("HTTP/1.1", "HTTP/2.0") the
	// first time a request arrives over it, so a --simulate run can show what modelgate spoke
	// without anything reaching the answers.
	FirstRequest func(proto string)
}

// Served is a running simulated platform.
type Served struct {
	// URL is the base URL; gateway and open API share it.
	URL string
	// RootCAs holds only the CA that signed the server's certificate (ServeH2), made at
	// start and never written to disk: a client trusts it and nothing else. Nil otherwise.
	RootCAs *x509.CertPool
	// Stop shuts the server down, releasing stalled handlers first.
	Stop func()
}

// Start serves the Sim over HTTP/1.1 on addr, which must be a loopback address (port 0 picks
// a free one), for --simulate. It returns the base URL and a stop function.
func (s *Sim) Start(addr string) (baseURL string, stop func(), err error) {
	sv, err := s.Serve(addr, ServeOptions{})
	if err != nil {
		return "", nil, err
	}
	return sv.URL, sv.Stop, nil
}

// Serve serves the Sim on the loopback address addr in the protocol o names.
func (s *Sim) Serve(addr string, o ServeOptions) (*Served, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("platformsim: listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("platformsim: listen address %q is not loopback", addr)
	}
	var handler http.Handler = s
	if o.FirstRequest != nil {
		handler = &protoWatch{next: s, first: o.FirstRequest}
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	sv := &Served{}
	scheme := "http"
	switch o.Protocol {
	case "", ServeH1:
	case ServeH2C:
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetUnencryptedHTTP2(true)
	case ServeH2:
		cert, roots, err := makeCert()
		if err != nil {
			return nil, fmt.Errorf("platformsim: certificate: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		sv.RootCAs, scheme = roots, "https"
	default:
		return nil, fmt.Errorf("platformsim: protocol %q: want h1, h2 or h2c", o.Protocol)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("platformsim: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if scheme == "https" {
			_ = srv.ServeTLS(ln, "", "") // the certificate is in TLSConfig
		} else {
			_ = srv.Serve(ln)
		}
	}()
	sv.URL = scheme + "://" + ln.Addr().String()
	sv.Stop = func() {
		s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
		<-done
	}
	return sv, nil
}

// protoWatch reports the first request of each HTTP major version.
type protoWatch struct {
	next  http.Handler
	first func(proto string)
	seen  [3]atomic.Bool // by ProtoMajor
}

func (p *protoWatch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if m := r.ProtoMajor; m >= 0 && m < len(p.seen) && !p.seen[m].Swap(true) {
		p.first(r.Proto)
	}
	p.next.ServeHTTP(w, r)
}
