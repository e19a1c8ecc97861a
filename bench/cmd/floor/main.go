// Command floor is the benchmark's reference: the smallest Go proxy that does modelgate's job,
// net/http/httputil.ReverseProxy swapping in the platform key and flushing every write. Its
// transport gets the same pool sizes as modelgate's, so the comparison is about the proxy.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"modelgate/bench/benchserve"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "listen address (loopback)")
	upstream := flag.String("upstream", "", "upstream base URL")
	key := flag.String("key", "", "platform key sent upstream")
	flag.Parse()
	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" {
		log.Fatalf("floor: --upstream must be an absolute URL")
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
		},
	}
	benchserve.Run(*listen, rp)
}
