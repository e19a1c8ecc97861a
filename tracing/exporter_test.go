package tracing

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"modelgate/apitest"
	"modelgate/tracing/tracingtest"
)

func noFiles(name string) ([]byte, error) { return nil, errors.New("no file " + name) }

// The exporter reads the OTEL_EXPORTER_OTLP_* variables as the specification says: the
// per-signal endpoint as given, the general one as a base for /v1/traces, per-signal
// settings over general ones.
func TestReadExporterConfig(t *testing.T) {
	cases := []struct {
		name    string
		env     []string
		url     string
		headers map[string]string
		timeout time.Duration
		gzip    bool
		err     string
	}{
		{name: "base", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"}, url: "http://c:4318/v1/traces", timeout: 10 * time.Second},
		{name: "base_path", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://c/otlp/"}, url: "https://c/otlp/v1/traces", timeout: 10 * time.Second},
		{name: "signal_as_is", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/custom"}, url: "http://c:4318/custom", timeout: 10 * time.Second},
		{name: "signal_no_path", env: []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318"}, url: "http://c:4318/", timeout: 10 * time.Second},
		{name: "headers_timeout_gzip", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c", "OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, x-team = t1", "OTEL_EXPORTER_OTLP_TIMEOUT", "2500", "OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"},
			url: "http://c/v1/traces", headers: map[string]string{"Api-Key": "a b", "X-Team": "t1"}, timeout: 2500 * time.Millisecond, gzip: true},
		{name: "signal_headers_win", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c", "OTEL_EXPORTER_OTLP_HEADERS", "a=1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "b=2", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "100", "OTEL_EXPORTER_OTLP_TIMEOUT", "nonsense"},
			url: "http://c/v1/traces", headers: map[string]string{"B": "2"}, timeout: 100 * time.Millisecond},
		{name: "no_endpoint", env: nil, err: "no OTLP endpoint"},
		{name: "bad_scheme", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"}, err: "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{name: "query", env: []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c/v1/traces?x=1"}, err: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{name: "json", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "bad_header", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c", "OTEL_EXPORTER_OTLP_HEADERS", "novalue"}, err: "OTEL_EXPORTER_OTLP_HEADERS"},
		{name: "header_injection", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c", "OTEL_EXPORTER_OTLP_HEADERS", "a=x%0D%0AEvil: 1"}, err: "OTEL_EXPORTER_OTLP_HEADERS"},
		{name: "bad_timeout", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c", "OTEL_EXPORTER_OTLP_TIMEOUT", "-5"}, err: "OTEL_EXPORTER_OTLP_TIMEOUT"},
		{name: "bad_compression", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "zstd"}, err: "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"},
		{name: "missing_ca", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://c", "OTEL_EXPORTER_OTLP_CERTIFICATE", "/ca.pem"}, err: "OTEL_EXPORTER_OTLP_CERTIFICATE"},
		{name: "cert_without_key", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://c", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/c.pem"}, err: "OTEL_EXPORTER_OTLP_CLIENT_KEY"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := readExporterConfig(envOf(tc.env...), noFiles)
			if apitest.ErrWanted(t, err, tc.err) {
				return
			}
			if c.url != tc.url || c.timeout != tc.timeout || c.gzip != tc.gzip {
				t.Errorf("url %q timeout %v gzip %t; want %q %v %t", c.url, c.timeout, c.gzip, tc.url, tc.timeout, tc.gzip)
			}
			if len(c.headers) != len(tc.headers) {
				t.Errorf("headers %v, want %v", c.headers, tc.headers)
			}
			for k, v := range tc.headers {
				if c.headers.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, c.headers.Get(k), v)
				}
			}
		})
	}
}

func FuzzParseHeaders(f *testing.F) {
	f.Add("a=b,c=d%20e")
	f.Add("=x")
	f.Add("k=%0a")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := parseHeaders(s)
		if err != nil {
			return
		}
		for k, vs := range h {
			if !validHeaderName(k) {
				t.Fatalf("invalid header name %q accepted", k)
			}
			for _, v := range vs {
				if strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("header value %q accepted", v)
				}
			}
		}
	})
}

// Every field modelgate's spans can carry survives the encoding: what is sent decodes, with
// the generated OTLP packages, to the same spans.
func TestEncodeRequestDecodes(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	psid, _ := trace.SpanIDFromHex("1111111111111111")
	ts, _ := trace.ParseTraceState("vendor=opaque")
	start := time.Unix(1700000000, 123)
	res := resource.NewSchemaless(attribute.String("service.name", "mg"))
	stubs := tracetest.SpanStubs{{
		Name:        "POST /v1/responses",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts}),
		Parent:      trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: psid, Remote: true}),
		SpanKind:    trace.SpanKindServer, StartTime: start, EndTime: start.Add(time.Second),
		Attributes: []attribute.KeyValue{
			attribute.String("s", "v"), attribute.Int64("i", -7), attribute.Float64("f", 0.25), attribute.Bool("b", false),
			attribute.StringSlice("ss", []string{"stop", ""}), attribute.Int64Slice("is", []int64{1, 2}),
			attribute.BoolSlice("bs", []bool{true}), attribute.Float64Slice("fs", []float64{1.5}),
		},
		Events:            []sdktrace.Event{{Name: "gen_ai.content.prompt", Time: start, Attributes: []attribute.KeyValue{attribute.StringSlice("x", []string{"y"})}}},
		Links:             []sdktrace.Link{{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: psid}), Attributes: []attribute.KeyValue{attribute.Int("n", 1)}}},
		Status:            sdktrace.Status{Code: codes.Error, Description: "client gone"},
		DroppedAttributes: 2, Resource: res,
		InstrumentationScope: instrumentation.Scope{Name: "modelgate", Version: "v1"},
	}, {
		Name:        "POST /v1/responses",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: psid, TraceFlags: trace.FlagsSampled}),
		SpanKind:    trace.SpanKindClient, StartTime: start, EndTime: start, Resource: res,
		InstrumentationScope: instrumentation.Scope{Name: "other"},
	}}
	var e encoder
	raw := e.encodeRequest(nil, stubs.Snapshots())
	var msg collector.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		t.Fatal(err)
	}
	if len(msg.ResourceSpans) != 1 || len(msg.ResourceSpans[0].ScopeSpans) != 2 {
		t.Fatalf("want one resource with two scopes: %v", &msg)
	}
	rs := msg.ResourceSpans[0]
	if kv := rs.Resource.Attributes; len(kv) != 1 || kv[0].Key != "service.name" || kv[0].Value.GetStringValue() != "mg" {
		t.Errorf("resource %v", rs.Resource)
	}
	ss := rs.ScopeSpans[0]
	if ss.Scope.Name != "modelgate" || ss.Scope.Version != "v1" || len(ss.Spans) != 1 {
		t.Fatalf("scope spans %v", ss)
	}
	s := ss.Spans[0]
	checks := []struct {
		name string
		ok   bool
	}{
		{"ids", string(s.TraceId) == string(tid[:]) && string(s.SpanId) == string(sid[:]) && string(s.ParentSpanId) == string(psid[:])},
		{"trace state", s.TraceState == "vendor=opaque"},
		{"flags", s.Flags == 0x301},
		{"name and kind", s.Name == "POST /v1/responses" && s.Kind == tracepb.Span_SPAN_KIND_SERVER},
		{"times", s.StartTimeUnixNano == uint64(start.UnixNano()) && s.EndTimeUnixNano == uint64(start.Add(time.Second).UnixNano())},
		{"attribute count", len(s.Attributes) == 8 && s.DroppedAttributesCount == 2},
		{"string", s.Attributes[0].Value.GetStringValue() == "v"},
		{"int", s.Attributes[1].Value.GetIntValue() == -7},
		{"double", s.Attributes[2].Value.GetDoubleValue() == 0.25},
		{"false bool is set", s.Attributes[3].Value.GetValue() != nil && !s.Attributes[3].Value.GetBoolValue()},
		{"string slice", len(s.Attributes[4].Value.GetArrayValue().GetValues()) == 2 && s.Attributes[4].Value.GetArrayValue().Values[0].GetStringValue() == "stop"},
		{"int slice", s.Attributes[5].Value.GetArrayValue().GetValues()[1].GetIntValue() == 2},
		{"bool slice", s.Attributes[6].Value.GetArrayValue().GetValues()[0].GetBoolValue()},
		{"double slice", s.Attributes[7].Value.GetArrayValue().GetValues()[0].GetDoubleValue() == 1.5},
		{"event", len(s.Events) == 1 && s.Events[0].Name == "gen_ai.content.prompt" && s.Events[0].TimeUnixNano == uint64(start.UnixNano()) &&
			s.Events[0].Attributes[0].Value.GetArrayValue().GetValues()[0].GetStringValue() == "y"},
		{"link", len(s.Links) == 1 && string(s.Links[0].SpanId) == string(psid[:]) && s.Links[0].Attributes[0].Value.GetIntValue() == 1},
		{"status", s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR && s.Status.GetMessage() == "client gone"},
		{"second scope", rs.ScopeSpans[1].Scope.Name == "other" && rs.ScopeSpans[1].Spans[0].Kind == tracepb.Span_SPAN_KIND_CLIENT && len(rs.ScopeSpans[1].Spans[0].ParentSpanId) == 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: decoded span %v", c.name, s)
		}
	}
}

// Messages are written with room for the length they most likely need; lengths that need
// less room or more (from a one-byte span to a batch past 2 MB) still decode to what was sent.
func TestEncodeRequestLengths(t *testing.T) {
	res := resource.NewSchemaless(attribute.String("service.name", "mg"))
	scope := instrumentation.Scope{Name: "modelgate"}
	sizes := []int{0, 1, 100, 127, 128, 16383 - 40, 16384, 70000, 3 << 20}
	var stubs tracetest.SpanStubs
	for i, n := range sizes {
		v := strings.Repeat(string(rune('a'+i)), n)
		stubs = append(stubs, tracetest.SpanStub{
			Name: v, Resource: res, InstrumentationScope: scope,
			Attributes: []attribute.KeyValue{attribute.String("v", v), attribute.StringSlice("vs", []string{v, "x"})},
			Events:     []sdktrace.Event{{Name: "e", Attributes: []attribute.KeyValue{attribute.String("v", v)}}},
		})
	}
	stubs = append(stubs, tracetest.SpanStub{Resource: res, InstrumentationScope: scope}) // an empty span
	var e encoder
	raw := e.encodeRequest([]byte("kept"), stubs.Snapshots())
	if string(raw[:4]) != "kept" {
		t.Fatal("encodeRequest overwrote what dst held")
	}
	var msg collector.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw[4:], &msg); err != nil {
		t.Fatal(err)
	}
	if len(msg.ResourceSpans) != 1 || len(msg.ResourceSpans[0].ScopeSpans) != 1 {
		t.Fatalf("want one resource and scope, got %d resources", len(msg.ResourceSpans))
	}
	spans := msg.ResourceSpans[0].ScopeSpans[0].Spans
	if len(spans) != len(sizes)+1 {
		t.Fatalf("%d spans decoded, want %d", len(spans), len(sizes)+1)
	}
	for i, n := range sizes {
		s := spans[i]
		v := strings.Repeat(string(rune('a'+i)), n)
		if s.Name != v || len(s.Attributes) != 2 || s.Attributes[0].Value.GetStringValue() != v ||
			s.Attributes[1].Value.GetArrayValue().GetValues()[0].GetStringValue() != v ||
			s.Attributes[1].Value.GetArrayValue().GetValues()[1].GetStringValue() != "x" ||
			len(s.Events) != 1 || s.Events[0].Attributes[0].Value.GetStringValue() != v {
			t.Errorf("span with %d-byte values did not decode to what was sent", n)
		}
	}
	if s := spans[len(sizes)]; s.Name != "" || len(s.Attributes) != 0 {
		t.Errorf("empty span decoded as %v", s)
	}
}

// A traced export goes to the collector with the configured headers, gzip-compressed when
// asked, and decodes there.
func TestExportReachesCollector(t *testing.T) {
	recv := tracingtest.NewReceiver(t)
	tr, err := New(context.Background(), Options{Version: "t", Getenv: envOf(
		"OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL(),
		"OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20collector-token",
		"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest("POST", "/v1/responses", nil)
	_, span := tr.StartServer(context.Background(), r, "/v1/responses")
	EndServer(span, Outcome{RequestID: "req_1", Status: 200}, &GenAI{RequestModel: "m", FinishReasons: []string{"stop"}})
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := recv.Spans()
	if len(spans) != 1 || spans[0].Attrs["gen_ai.request.model"] != "m" || spans[0].Resource["service.name"] == nil {
		t.Fatalf("received %+v (errors %v)", spans, recv.Errors())
	}
	h := recv.Header()
	if h.Get("Authorization") != "Bearer collector-token" || h.Get("Content-Encoding") != "gzip" || h.Get("Content-Type") != "application/x-protobuf" {
		t.Errorf("export headers %v", h)
	}
}

// An export that cannot be delivered is an error that says so; after Shutdown nothing is sent.
func TestExportReportsRefusal(t *testing.T) {
	x, err := newExporter(envOf("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TIMEOUT", "2000"), "t")
	if err != nil {
		t.Fatal(err)
	}
	stubs := tracetest.SpanStubs{{Name: "s"}}
	if err := x.ExportSpans(context.Background(), stubs.Snapshots()); err == nil || !strings.Contains(err.Error(), "traces export") {
		t.Errorf("export to a closed port: %v", err)
	}
	_ = x.Shutdown(context.Background())
	if err := x.ExportSpans(context.Background(), stubs.Snapshots()); err != nil {
		t.Errorf("export after shutdown: %v", err)
	}
}
