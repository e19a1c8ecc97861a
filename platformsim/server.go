package platformsim

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Start serves the Sim on addr, which must be a loopback address (port 0 picks a free one),
// for --simulate. It returns the base URL (gateway and open API share it) and a stop function
// that shuts the server down, releasing stalled handlers first.
func (s *Sim) Start(addr string) (baseURL string, stop func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("platformsim: listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", nil, fmt.Errorf("platformsim: listen address %q is not loopback", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("platformsim: %w", err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	stop = func() {
		s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
		<-done
	}
	return "http://" + ln.Addr().String(), stop, nil
}
