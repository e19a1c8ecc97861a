// Package benchserve starts the benchmark's helper servers the way the driver expects them.
package benchserve

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"
)

// Run listens on listen, prints the server's base URL as the first line of stdout (the
// driver reads the chosen port from it, so listen may end in :0) and serves h until the
// process is stopped. It does not return: any failure ends the process.
func Run(listen string, h http.Handler) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(os.Stdout, "http://"+ln.Addr().String())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}
