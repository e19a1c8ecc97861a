package tests

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMDrainsStreams sends SIGTERM while a slow stream is in flight: the stream still
// ends with its terminal event, a request sent after the signal is refused, and the process
// exits 0.
func TestSIGTERMDrainsStreams(t *testing.T) {
	for _, tc := range slowStreams() {
		t.Run(tc.name, func(t *testing.T) {
			_, g := startKeysGateway(t, "")

			stream := startStream(t, g.URL+tc.route, alphaKey, tc.body)
			if stream.status != http.StatusOK {
				t.Fatalf("stream status %d", stream.status)
			}
			stream.waitStarted(t)

			g.Signal(t, syscall.SIGTERM)
			waitForLog(t, g, "draining", 1)
			stream.stillOpen(t, "SIGTERM")
			code, _, body, err := opsDo(t, "POST", g.URL+"/v1/chat/completions", alphaKey, chatBody("sim-chat", "too late", false))
			if err == nil && code != http.StatusServiceUnavailable {
				t.Errorf("request after SIGTERM: status %d, want 503 or a refused connection: %.200s", code, body)
			}

			got := stream.wait(t)
			if stream.err != nil {
				t.Errorf("stream broke during the drain: %v", stream.err)
			}
			if !strings.Contains(got, tc.terminal) {
				t.Errorf("stream lacks its terminal %q after SIGTERM:\n%.2000s", tc.terminal, got)
			}
			if exit := g.Wait(t, 30*time.Second); exit != 0 {
				t.Errorf("exit status %d, want 0", exit)
			}
			if strings.Contains(g.Output.String(), "drain timeout reached") {
				t.Error("the drain timed out although the stream finished")
			}
		})
	}
}

// TestSIGTERMDrainIsBounded: a stream longer than server.drain_timeout does not hold the
// process: it is cut when the timeout passes, and the exit status is still 0.
func TestSIGTERMDrainIsBounded(t *testing.T) {
	p := startPlatform(t)
	const drain = 300 * time.Millisecond
	g := startGateway(t, gatewayOptions{ConfigYAML: keysConfig(p, "server:\n  drain_timeout: 300ms\n"), Env: keysEnv(p)})

	stream := startStream(t, g.URL+"/v1/chat/completions", alphaKey, chatBody("sim-slow", slowPrompt, true))
	stream.waitStarted(t)
	signalled := time.Now()
	g.Signal(t, syscall.SIGTERM)
	if exit := g.Wait(t, 20*time.Second); exit != 0 {
		t.Errorf("exit status %d, want 0", exit)
	}
	took := time.Since(signalled)
	got := stream.wait(t)
	if strings.Contains(got, "data: [DONE]") {
		t.Fatalf("a stream of about 2.5s finished within the %v drain (exit after %v)", drain, took)
	}
	if !strings.Contains(g.Output.String(), "drain timeout reached") {
		t.Error("the log should say the drain timed out")
	}
	if took > drain+5*time.Second {
		t.Errorf("exit took %v with drain_timeout %v", took, drain)
	}
}
