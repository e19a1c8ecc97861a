package platformsim

import (
	"strings"
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
