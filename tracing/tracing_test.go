package tracing

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func envOf(kv ...string) func(string) string {
	return func(k string) string {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == k {
				return kv[i+1]
			}
		}
		return ""
	}
}

// Tracing is on only when an OTLP endpoint is named, and the standard switches turn it off.
func TestEnabled(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		want bool
	}{
		{"nothing_set", nil, false},
		{"endpoint", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"}, true},
		{"traces_endpoint", []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/v1/traces"}, true},
		{"only_headers", []string{"OTEL_EXPORTER_OTLP_HEADERS", "a=b", "OTEL_SERVICE_NAME", "x"}, false},
		{"sdk_disabled", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_SDK_DISABLED", "TRUE"}, false},
		{"sdk_disabled_false", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_SDK_DISABLED", "false"}, true},
		{"exporter_none", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_TRACES_EXPORTER", "none"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Enabled(envOf(tc.env...)); got != tc.want {
				t.Errorf("Enabled = %t, want %t", got, tc.want)
			}
		})
	}
}

// A configuration modelgate cannot honour fails New with a message naming the variable.
func TestNewRefusesWhatItCannotExport(t *testing.T) {
	cases := []struct {
		env  []string
		want string
	}{
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_TRACES_EXPORTER", "zipkin"}, "OTEL_TRACES_EXPORTER"},
	}
	for _, tc := range cases {
		tr, err := New(context.Background(), Options{Getenv: envOf(tc.env...)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("env %v: New = %v, %v; want an error naming %s", tc.env, tr, err, tc.want)
		}
	}
	// The per-signal protocol wins over the general one.
	tr, err := New(context.Background(), Options{Getenv: envOf("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")})
	if err != nil || tr == nil {
		t.Fatalf("http/protobuf for traces: New = %v, %v", tr, err)
	}
	_ = tr.Shutdown(context.Background())
}

// A nil Tracer is tracing off: its methods do nothing.
func TestNilTracer(t *testing.T) {
	var tr *Tracer
	if tr.Shutdown(context.Background()) != nil || tr.ForceFlush(context.Background()) != nil || tr.ContentMax() != 0 {
		t.Error("a nil tracer did something")
	}
}

// Content capture is off unless asked for by the option or the environment variable, and
// its cap defaults to DefaultContentMaxBytes.
func TestContentCaptureOptIn(t *testing.T) {
	cases := []struct {
		name string
		o    Options
		env  []string
		want int
	}{
		{"off", Options{}, nil, 0},
		{"option", Options{CaptureContent: true}, nil, DefaultContentMaxBytes},
		{"option_cap", Options{CaptureContent: true, ContentMaxBytes: 100}, nil, 100},
		{"env", Options{}, []string{CaptureContentEnv, "true"}, DefaultContentMaxBytes},
		{"env_false", Options{}, []string{CaptureContentEnv, "false"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Getenv = envOf(tc.env...)
			tr, err := NewWithExporter(context.Background(), tracetest.NewInMemoryExporter(), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Shutdown(context.Background())
			if got := tr.ContentMax(); got != tc.want {
				t.Errorf("ContentMax = %d, want %d", got, tc.want)
			}
		})
	}
}

// Captured content is cut at the cap on a character boundary, and says so.
func TestRecordContentCap(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	_, span := tp.Tracer("t").Start(context.Background(), "s")
	RecordContent(span, EventPrompt, AttrInputMessages, "ab"+strings.Repeat("€", 3), 6) // € is 3 bytes
	RecordContent(span, EventCompletion, AttrOutputMessages, "short", 6)
	RecordContent(span, EventCompletion, AttrOutputMessages, "", 6)      // nothing to record
	RecordContent(span, EventCompletion, AttrOutputMessages, "never", 0) // capture off
	span.End()
	evs := exp.GetSpans()[0].Events
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2: %+v", len(evs), evs)
	}
	got := map[string]any{}
	for _, a := range evs[0].Attributes {
		got[string(a.Key)] = a.Value.AsInterface()
	}
	if got[AttrInputMessages] != "ab€" || got[AttrTruncated] != true || got[AttrContentBytes] != int64(11) {
		t.Errorf("capped prompt event %v", got)
	}
	for _, a := range evs[1].Attributes {
		if a.Key == AttrTruncated && a.Value.AsBool() {
			t.Error("content under the cap marked truncated")
		}
	}
}

func FuzzCapUTF8(f *testing.F) {
	f.Add("ab€€", 4)
	f.Add("", 0)
	f.Add("\xff\xfe", 1)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<16 {
			return
		}
		got, cut := capUTF8(s, max)
		if len(got) > max || !strings.HasPrefix(s, got) || cut != (len(s) > max) {
			t.Fatalf("capUTF8(%q, %d) = %q, %t", s, max, got, cut)
		}
		if cut && utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("capUTF8(%q, %d) split a character: %q", s, max, got)
		}
	})
}

// StartServer continues the caller's trace from traceparent and tracestate.
func TestStartServerContinuesCallerTrace(t *testing.T) {
	tr, err := NewWithExporter(context.Background(), tracetest.NewInMemoryExporter(), Options{Getenv: envOf()})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	r := httptest.NewRequest("POST", "/v1/responses", nil)
	r.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	r.Header.Set("tracestate", "vendor=opaque")
	ctx, span := tr.StartServer(context.Background(), r, "/v1/responses")
	sc := span.SpanContext()
	if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.TraceState().String() != "vendor=opaque" {
		t.Errorf("span context %v, want the caller's trace and state", sc)
	}
	actx, attempt := tr.StartAttempt(ctx)
	out := httptest.NewRequest("POST", "http://platform/v1/responses", nil)
	tr.Inject(actx, out.Header)
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + attempt.SpanContext().SpanID().String() + "-01"
	if got := out.Header.Get("traceparent"); got != want || out.Header.Get("tracestate") != "vendor=opaque" {
		t.Errorf("injected traceparent %q tracestate %q, want %q and the caller's state", got, out.Header.Get("tracestate"), want)
	}
}

// The batch sizes are modelgate's where OTEL_BSP_* leave them unset, the environment's where
// it sets them, and a batch is never larger than its queue.
func TestBatchOptions(t *testing.T) {
	cases := []struct {
		env          []string
		queue, batch int // 0, 0: left to the SDK
	}{
		{nil, defaultQueueSize, defaultBatchSize},
		{[]string{"OTEL_BSP_MAX_QUEUE_SIZE", "1000"}, 1000, 1000},
		{[]string{"OTEL_BSP_MAX_QUEUE_SIZE", "100000"}, 100000, defaultBatchSize},
		{[]string{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "100"}, defaultQueueSize, 100},
		{[]string{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "10000"}, 10000, 10000},
		{[]string{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", " 300 ", "OTEL_BSP_MAX_QUEUE_SIZE", "junk"}, defaultQueueSize, 300},
		{[]string{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "-1"}, defaultQueueSize, defaultBatchSize},
		{[]string{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "100", "OTEL_BSP_MAX_QUEUE_SIZE", "50"}, 0, 0},
	}
	for _, tc := range cases {
		opts := batchOptions(envOf(tc.env...))
		if tc.queue == 0 {
			if len(opts) != 0 {
				t.Errorf("%v: %d options, want the SDK's reading", tc.env, len(opts))
			}
			continue
		}
		var o sdktrace.BatchSpanProcessorOptions
		for _, f := range opts {
			f(&o)
		}
		if o.MaxQueueSize != tc.queue || o.MaxExportBatchSize != tc.batch {
			t.Errorf("%v: queue %d, batch %d; want %d, %d", tc.env, o.MaxQueueSize, o.MaxExportBatchSize, tc.queue, tc.batch)
		}
	}
}
