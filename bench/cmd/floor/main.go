// Command floor is the benchmark's reference: the smallest Go proxy that does modelgate's job,
// net/http/httputil.ReverseProxy swapping in the platform key and flushing every write. Its
// transport speaks to the upstream as modelgate's does in each --upstream mode (the same
// protocols, pool sizes and HTTP/2 stream window), so the comparison is about the proxy.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"

	"modelgate/bench/benchserve"
)

// streamWindow is modelgate's HTTP/2 receive window per stream (platform.StreamReceiveWindow,
// not imported: the floor links nothing of modelgate's but the helper servers).
const streamWindow = 256 << 10

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "listen address (loopback)")
	upstream := flag.String("upstream", "", "upstream base URL")
	key := flag.String("key", "", "platform key sent upstream")
	http2 := flag.String("upstream-http2", "auto", "HTTP/2 to the upstream, as modelgate's upstream.http2: auto, h2c or off")
	caFile := flag.String("upstream-ca", "", "PEM CA file the upstream's certificate chains to, as upstream.tls.ca_file")
	flag.Parse()
	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" {
		log.Fatalf("floor: --upstream must be an absolute URL")
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			log.Fatal(err)
		}
		tlsConf.RootCAs = x509.NewCertPool()
		if !tlsConf.RootCAs.AppendCertsFromPEM(pem) {
			log.Fatalf("floor: no certificate in %s", *caFile)
		}
	}
	protocols := new(http.Protocols)
	switch *http2 {
	case "h2c":
		protocols.SetUnencryptedHTTP2(true)
	case "off":
		protocols.SetHTTP1(true)
	default:
		protocols.SetHTTP1(true)
		protocols.SetHTTP2(true)
	}
	auth := "Bearer " + *key
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set("Authorization", auth)
		},
		FlushInterval: -1,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
			TLSClientConfig:     tlsConf,
			Protocols:           protocols,
			HTTP2:               &http.HTTP2Config{MaxReceiveBufferPerStream: streamWindow, SendPingTimeout: 30 * time.Second},
		},
	}
	benchserve.Run(*listen, rp, benchserve.Protocol{})
}
