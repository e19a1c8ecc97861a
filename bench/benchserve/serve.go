// Package benchserve starts the benchmark's helper servers the way the driver expects them.
package benchserve

import (
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"
)

// Protocol is how a helper server is spoken to, the modes of bench/run.sh --upstream:
// "h1" plain HTTP/1.1, "h2" TLS offering h2 and http/1.1 by ALPN, "h2c" HTTP/2 with prior
// knowledge over plain TCP (HTTP/1.1 is served there too: wrk, which speaks only HTTP/1.1,
// calls the upstream directly as the latency phase's reference).
type Protocol struct {
	Mode     string
	CertFile string // h2: the server's certificate chain (PEM), see platformsim.NewCertificate
	KeyFile  string // h2: its key (PEM)
}

// Flags registers --serve, --tls-cert and --tls-key on fs.
func (p *Protocol) Flags(fs *flag.FlagSet) {
	fs.StringVar(&p.Mode, "serve", "h1", "protocol served: h1, h2 (TLS with ALPN) or h2c")
	fs.StringVar(&p.CertFile, "tls-cert", "", "certificate chain for --serve h2 (PEM)")
	fs.StringVar(&p.KeyFile, "tls-key", "", "key for --serve h2 (PEM)")
}

// Run listens on listen, prints the server's base URL as the first line of stdout (the
// driver reads the chosen port from it, so listen may end in :0) and serves h as p says
// until the process is stopped. It does not return: any failure ends the process.
func Run(listen string, h http.Handler, p Protocol) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	switch p.Mode {
	case "", "h1":
		srv.Protocols.SetHTTP1(true)
	case "h2c":
		srv.Protocols.SetUnencryptedHTTP2(true)
		srv.Protocols.SetHTTP1(true)
	case "h2":
		cert, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
		if err != nil {
			log.Fatalf("--serve h2: %v", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetHTTP2(true)
		fmt.Fprintln(os.Stdout, "https://"+ln.Addr().String())
		log.Fatal(srv.ServeTLS(ln, "", "")) // offers h2 and http/1.1 by ALPN
	default:
		log.Fatalf("--serve: want h1, h2 or h2c, got %q", p.Mode)
	}
	fmt.Fprintln(os.Stdout, "http://"+ln.Addr().String())
	log.Fatal(srv.Serve(ln))
}
