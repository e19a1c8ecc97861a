package tests

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"modelgate/tracing/tracingtest"
)

// With the batch delay set far beyond the test, spans can only reach the collector through
// the flush on SIGTERM: the stream in flight when the signal came is exported, with its usage,
// before the process exits, and the process still exits within the drain timeout.
func TestTracingFlushedOnSIGTERMDrain(t *testing.T) {
	recv := tracingtest.NewReceiver(t)
	p := startPlatform(t)
	env := keysEnv(p)
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = recv.URL()
	env["OTEL_BSP_SCHEDULE_DELAY"] = "600000" // ten minutes: no export but the drain's
	env["OTEL_SERVICE_NAME"] = "modelgate-e2e"
	env["OTEL_RESOURCE_ATTRIBUTES"] = "deployment.environment.name=test"
	g := startGateway(t, gatewayOptions{ConfigYAML: keysConfig(p, "server:\n  drain_timeout: 10s\n"), Env: env,
		Args: []string{"--log-format", "json"}})
	waitForLog(t, g, `"tracing on"`, 1)

	code, body := opsMust(t, "POST", g.URL+"/v1/chat/completions", alphaKey, chatBody("sim-chat", "hello", false))
	if code != http.StatusOK {
		t.Fatalf("chat: status %d: %s", code, body)
	}
	stream := startStream(t, g.URL+"/v1/responses", alphaKey, responsesBody("sim-slow", "hold on", true))
	if stream.status != http.StatusOK {
		t.Fatalf("stream status %d", stream.status)
	}
	stream.waitStarted(t)
	if n := recv.Requests(); n != 0 {
		t.Fatalf("%d exports before the drain; the batch delay should hold them back", n)
	}
	began := time.Now()
	g.Signal(t, syscall.SIGTERM)
	if got := stream.wait(t); !strings.Contains(got, "response.completed") {
		t.Fatalf("the stream did not finish during the drain:\n%.1000s", got)
	}
	if exit := g.Wait(t, 15*time.Second); exit != 0 {
		t.Fatalf("exit status %d", exit)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("stopping took %v, beyond the 10s drain timeout", took)
	}
	spans := recv.Spans()
	servers := tracingtest.Find(spans, tracingtest.Server, "")
	if len(servers) != 2 {
		t.Fatalf("%d server spans exported on the drain, want the chat call's and the stream's: %+v", len(servers), spans)
	}
	var streamSpan tracingtest.Span
	for _, s := range servers {
		if s.Name == "POST /v1/responses" {
			streamSpan = s
		}
		if s.Resource["service.name"] != "modelgate-e2e" || s.Resource["deployment.environment.name"] != "test" {
			t.Errorf("resource %v, want OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES applied", s.Resource)
		}
	}
	if n, _ := streamSpan.Attrs["gen_ai.usage.output_tokens"].(int64); n <= 0 || streamSpan.Attrs["gen_ai.request.model"] != "sim-slow" {
		t.Errorf("the stream's span lacks its model or usage: %v", streamSpan.Attrs)
	}
	if len(tracingtest.Find(spans, tracingtest.Client, "")) != 2 {
		t.Errorf("want one client span per platform call, got spans %+v", spans)
	}
	out := g.Output.String()
	if !strings.Contains(out, `"trace_id":"`+streamSpan.TraceID+`"`) {
		t.Errorf("no log line carries the stream's trace_id %s", streamSpan.TraceID)
	}
	g.assertNoSecret(t, p.Key)
	for _, s := range spans {
		if all := fmt.Sprint(s.Name, s.Attrs, s.Events, s.Resource); strings.Contains(all, alphaKey) || strings.Contains(all, p.Key) {
			t.Errorf("span %q carries a key", s.Name)
		}
	}
}

// A trace protocol modelgate cannot speak stops it at start with a message that says why,
// rather than traces silently going nowhere.
func TestTracingRefusesGRPC(t *testing.T) {
	cmd := exec.Command(binPath, "--simulate", "--listen", freePort(t))
	cmd.Dir = t.TempDir()
	cmd.Env = append(cmd.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1:\n%s", err, out)
	}
	if !strings.Contains(string(out), "OTEL_EXPORTER_OTLP_PROTOCOL") || !strings.Contains(string(out), "http/protobuf") {
		t.Errorf("the refusal does not name the variable and what is supported:\n%s", out)
	}
}

// A stream still open when the drain times out is cut, and its span is exported all the same,
// saying that the shutdown cut it.
func TestTracingDrainCutStreamExported(t *testing.T) {
	recv := tracingtest.NewReceiver(t)
	p := startPlatform(t)
	env := keysEnv(p)
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = recv.URL()
	env["OTEL_BSP_SCHEDULE_DELAY"] = "600000"
	g := startGateway(t, gatewayOptions{ConfigYAML: keysConfig(p, "server:\n  drain_timeout: 1s\n"), Env: env})
	stream := startStream(t, g.URL+"/v1/chat/completions", alphaKey, chatBody("sim-slow", slowPrompt, true))
	stream.waitStarted(t)
	g.Signal(t, syscall.SIGTERM)
	if exit := g.Wait(t, 20*time.Second); exit != 0 {
		t.Fatalf("exit status %d", exit)
	}
	if got := stream.wait(t); strings.Contains(got, "data: [DONE]") {
		t.Fatal("the stream finished within the drain; it should have been cut")
	}
	servers := tracingtest.Find(recv.Spans(), tracingtest.Server, "POST /v1/chat/completions")
	if len(servers) != 1 {
		t.Fatalf("%d spans of the cut stream exported, want 1 (log:\n%s)", len(servers), g.Output.String())
	}
	if s := servers[0]; s.StatusCode != tracingtest.StatusError || s.Attrs["error.type"] != "shutdown" {
		t.Errorf("the cut stream's span: status %v %q, error.type %v; want an error naming the shutdown", s.StatusCode, s.StatusMessage, s.Attrs["error.type"])
	}
}
