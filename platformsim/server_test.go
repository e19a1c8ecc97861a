package platformsim

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestStart(t *testing.T) {
	sim := New(Options{})
	url, stop, err := sim.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("url %s", url)
	}
	// A stalled request must not keep stop from returning.
	sim.Enqueue("/v1/responses", Reply{Fault: FaultStallBeforeHeaders})
	go func() {
		resp, err := httpPost(url+"/v1/responses", `{"model":"sim-chat","input":"x"}`)
		if err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, "the stalled request", func() bool { return len(sim.Requests()) == 1 })
	status, _, b := call(t, "POST", url+"/v1/responses", "any-key", []byte(`{"model":"sim-chat","input":"x"}`))
	if status != 200 || outputText(mustJSON(t, b)) == "" {
		t.Errorf("%d %s", status, b)
	}
	stop()
	if _, err := httpPost(url+"/v1/responses", `{}`); err == nil {
		t.Error("still serving after stop")
	}
}

func TestStartRefusesNonLoopback(t *testing.T) {
	tests := []struct{ name, addr string }{
		{"all_interfaces", ":0"},
		{"wildcard_ip", "0.0.0.0:0"},
		{"hostname", "example.com:0"},
		{"no_port", "127.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := New(Options{}).Start(tc.addr); err == nil {
				t.Errorf("Start(%q) succeeded", tc.addr)
			}
		})
	}
}

// TestServeProtocols: each --simulate-upstream mode answers over its protocol, reports the
// first request of each protocol once, and under h2 is trusted through its own CA alone.
func TestServeProtocols(t *testing.T) {
	cases := []struct {
		protocol, scheme, want string
	}{
		{"", "http", "HTTP/1.1"},
		{ServeH1, "http", "HTTP/1.1"},
		{ServeH2, "https", "HTTP/2.0"},
		{ServeH2C, "http", "HTTP/2.0"},
	}
	for _, tc := range cases {
		t.Run("mode_"+tc.protocol, func(t *testing.T) {
			var mu sync.Mutex
			var firsts []string
			sv, err := New(Options{}).Serve("127.0.0.1:0", ServeOptions{Protocol: tc.protocol, FirstRequest: func(p string) {
				mu.Lock()
				firsts = append(firsts, p)
				mu.Unlock()
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer sv.Stop()
			if !strings.HasPrefix(sv.URL, tc.scheme+"://127.0.0.1:") || (sv.RootCAs != nil) != (tc.protocol == ServeH2) {
				t.Fatalf("url %s, roots %v", sv.URL, sv.RootCAs != nil)
			}
			tr := &http.Transport{Protocols: new(http.Protocols), TLSClientConfig: &tls.Config{RootCAs: sv.RootCAs}}
			if tc.protocol == ServeH2C {
				tr.Protocols.SetUnencryptedHTTP2(true)
			} else {
				tr.Protocols.SetHTTP1(true)
				tr.Protocols.SetHTTP2(true)
			}
			defer tr.CloseIdleConnections()
			for i := 0; i < 3; i++ {
				req, _ := http.NewRequest("POST", sv.URL+"/v1/responses", strings.NewReader(`{"model":"sim-chat","input":"x"}`))
				req.Header.Set("Authorization", "Bearer any-key")
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || resp.Proto != tc.want {
					t.Fatalf("status %d over %s, want 200 over %s", resp.StatusCode, resp.Proto, tc.want)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(firsts) != 1 || firsts[0] != tc.want {
				t.Errorf("first requests reported: %q, want [%s]", firsts, tc.want)
			}
		})
	}
}

// TestServeH2TrustsOnlyItsCA: the simulated platform's certificate chains to no system root,
// and its CA signs nothing else; an unknown protocol is refused.
func TestServeH2TrustsOnlyItsCA(t *testing.T) {
	sv, err := New(Options{}).Serve("127.0.0.1:0", ServeOptions{Protocol: ServeH2})
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Stop()
	if _, err := httpPost(sv.URL+"/v1/responses", `{}`); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client with the system roots got %v; want a certificate error", err)
	}
	other, err := New(Options{}).Serve("127.0.0.1:0", ServeOptions{Protocol: ServeH2})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: sv.RootCAs}}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", other.URL+"/v1/models", nil)
	if resp, err := tr.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Error("one run's CA trusted another run's certificate")
	}
	if _, err := New(Options{}).Serve("127.0.0.1:0", ServeOptions{Protocol: "h3"}); err == nil {
		t.Error("protocol h3 accepted")
	}
}
