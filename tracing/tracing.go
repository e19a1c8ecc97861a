// Package tracing exports modelgate's OpenTelemetry traces over OTLP/HTTP, configured by the
// standard OTEL_* environment variables, and names the attributes modelgate records (the
// GenAI semantic conventions and modelgate's own).
//
// Tracing is off unless an OTLP endpoint is named. Off means New returns a nil *Tracer: no
// exporter, no provider, and the proxy's hot path tests one pointer and creates nothing.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Options are what modelgate itself decides; everything else comes from the environment,
// read by the SDK and the exporter as the OpenTelemetry specification describes.
type Options struct {
	// Version is the service.version resource attribute.
	Version string
	// CaptureContent records prompts and completions as span events. Off by default:
	// prompts are the callers' data.
	CaptureContent bool
	// ContentMaxBytes caps each recorded prompt or completion; 0 means DefaultContentMaxBytes.
	ContentMaxBytes int
	// Logger receives the SDK's errors (failed exports); nil leaves OpenTelemetry's default.
	Logger *slog.Logger
	// Getenv reads the environment; nil means os.Getenv. It decides whether tracing is on,
	// the exporter's settings and the capture opt-in; the SDK reads the sampler, batch and
	// resource variables from the process environment itself.
	Getenv func(string) string
}

// DefaultContentMaxBytes caps a captured prompt or completion when nothing else is set.
const DefaultContentMaxBytes = 4096

// CaptureContentEnv turns on content capture, as OpenTelemetry's GenAI instrumentations do.
const CaptureContentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// Tracer is modelgate's tracing, on. A nil *Tracer is tracing off; its methods are safe to
// call and do nothing.
type Tracer struct {
	provider   *sdktrace.TracerProvider
	tracer     trace.Tracer
	prop       propagation.TraceContext
	contentMax int // 0: content is not captured
	names      *spanStarts
	open       openCount // requests started (StartRequest) whose span has not ended
}

// Enabled reports whether the environment asks for traces: an OTLP endpoint is named and
// neither OTEL_SDK_DISABLED nor OTEL_TRACES_EXPORTER=none turns them off.
func Enabled(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) != "none"
}

// New starts tracing when the environment asks for it, and returns nil, nil when it does
// not. A configuration modelgate cannot honour (a gRPC protocol, another exporter) is an
// error rather than traces silently sent nowhere.
func New(ctx context.Context, o Options) (*Tracer, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if !Enabled(getenv) {
		return nil, nil
	}
	if exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp != "" && exp != "otlp" {
		return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q is not supported; modelgate exports OTLP (otlp) or nothing (none)", exp)
	}
	exporter, err := newExporter(getenv, o.Version)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return NewWithExporter(ctx, exporter, o)
}

// NewWithExporter is New with the exporter given, for tests and benchmarks; the sampler,
// batching and resource still come from the environment.
func NewWithExporter(ctx context.Context, exporter sdktrace.SpanExporter, o Options) (*Tracer, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if o.Logger != nil {
		// One process, one tracing setup: the handler is OpenTelemetry's global. Set first,
		// so a bad OTEL_TRACES_SAMPLER is reported in modelgate's log too.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			o.Logger.Warn("tracing: " + err.Error())
		}))
	}
	// service.name defaults to modelgate; OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME,
	// applied after, override it.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "modelgate"), attribute.String("service.version", o.Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// Otherwise a malformed OTEL_RESOURCE_ATTRIBUTES, which the SDK reports: the rest of the
	// resource still applies.
	// The sampler (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG; parent-based always-on by
	// default) and the batch settings (OTEL_BSP_*) are read by the SDK; batchOptions gives
	// modelgate's batch sizes where the environment names none.
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter, batchOptions(os.Getenv)...),
		sdktrace.WithResource(res),
	)
	t := &Tracer{provider: provider, tracer: provider.Tracer("modelgate"), names: newSpanStarts()}
	if o.CaptureContent || strings.EqualFold(strings.TrimSpace(getenv(CaptureContentEnv)), "true") {
		t.contentMax = o.ContentMaxBytes
		if t.contentMax <= 0 {
			t.contentMax = DefaultContentMaxBytes
		}
	}
	return t, nil
}

// modelgate's batch sizes, for OTEL_BSP_MAX_EXPORT_BATCH_SIZE and OTEL_BSP_MAX_QUEUE_SIZE
// when they are not set: four times the SDK's 512-span batch, in a queue twice the batch
// rather than four times. Traced at ratio 1.0, a busy modelgate ends two spans per request:
// a quarter of the exports is a quarter of the per-export work (here and at the collector),
// and the spans a batch holds until it is sent keep modelgate's heap, otherwise near the
// runtime's 4 MB floor, from being collected as often: in the proxy's tracing benchmark the
// garbage collector is the largest single share of what tracing adds. The price is memory:
// about 4 MB more resident while busy, and up to about 6 MB more while the collector cannot
// keep up (6144 spans held instead of 2560).
const (
	defaultBatchSize = 2048
	defaultQueueSize = 4096
)

// batchOptions are the batch processor's sizes: the SDK's reading of OTEL_BSP_* when both
// sizes are set, and modelgate's defaults for those that are not (a batch no larger than
// the queue).
func batchOptions(getenv func(string) string) []sdktrace.BatchSpanProcessorOption {
	queue, queueSet := positiveEnv(getenv, "OTEL_BSP_MAX_QUEUE_SIZE")
	batch, batchSet := positiveEnv(getenv, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
	if queueSet && batchSet {
		return nil
	}
	if !queueSet {
		queue = max(defaultQueueSize, batch)
	}
	if !batchSet {
		batch = min(defaultBatchSize, queue)
	}
	return []sdktrace.BatchSpanProcessorOption{sdktrace.WithMaxQueueSize(queue), sdktrace.WithMaxExportBatchSize(batch)}
}

// positiveEnv reads a positive integer; anything else is as good as unset (the SDK reports a
// malformed value).
func positiveEnv(getenv func(string) string, name string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(getenv(name)))
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// Shutdown exports what is buffered and stops the exporter, giving up when ctx ends.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// ForceFlush exports what is buffered now.
func (t *Tracer) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}

// ContentMax is the cap on a captured prompt or completion, 0 when content is not captured.
func (t *Tracer) ContentMax() int {
	if t == nil {
		return 0
	}
	return t.contentMax
}

// StartServer starts the span of one incoming request, continuing the caller's trace when
// its traceparent (and tracestate) headers name one. The span is named "{method} {route}";
// route is the route pattern, never the raw path. EndServer records the method and route
// with the outcome (Outcome.Method, Outcome.Route).
//
// They are not given at the start, where the HTTP conventions would have a sampler see
// them: modelgate's samplers are the SDK's, chosen by OTEL_TRACES_SAMPLER, and none of them
// reads attributes. Given at the start they would cost the SDK two more attribute slices
// and a second SetAttributes per request, for the same exported span.
func (t *Tracer) StartServer(ctx context.Context, r *http.Request, route string) (context.Context, trace.Span) {
	ctx = t.prop.Extract(ctx, headerCarrier(r.Header))
	return t.tracer.Start(ctx, t.names.serverName(r.Method, route), serverOpts...)
}

// StartAttempt starts the client span of one attempt at an upstream call; Inject puts its
// context on the request, and EndAttempt names and ends it once the attempt is over.
func (t *Tracer) StartAttempt(ctx context.Context) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, "upstream", clientOpts...)
}

// The span kinds as start options, made once: an option is an allocation, and so is the
// slice of options a call through the Tracer interface would otherwise build.
var (
	serverOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	clientOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
)

// Inject puts ctx's span context on h as traceparent (and tracestate, when the trace has one).
func (t *Tracer) Inject(ctx context.Context, h http.Header) {
	t.prop.Inject(ctx, headerCarrier(h))
}

// headerCarrier is propagation.HeaderCarrier with the W3C headers' canonical names spelled
// out: net/http would otherwise build "Traceparent" from "traceparent" on every Get and Set,
// an allocation each, twice per traced request.
type headerCarrier http.Header

func (c headerCarrier) Get(key string) string {
	if k := canonicalTraceHeader(key); k != "" {
		if v := c[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return http.Header(c).Get(key)
}

func (c headerCarrier) Set(key, value string) {
	if k := canonicalTraceHeader(key); k != "" {
		c[k] = []string{value}
		return
	}
	http.Header(c).Set(key, value)
}

func (c headerCarrier) Keys() []string { return propagation.HeaderCarrier(c).Keys() }

func canonicalTraceHeader(key string) string {
	switch key {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	}
	return ""
}

// Attempt is one attempt at an upstream call, as its span reports it.
type Attempt struct {
	Request *http.Request // as sent; never its query or headers, which hold the credential
	N       int           // 1 for the first attempt
	Status  int           // the platform's answer, 0 when there was none
	ErrKind string        // the transport failure when there was no answer
}

// EndAttempt names an attempt's span after its request, records how it went and ends it.
func (t *Tracer) EndAttempt(span trace.Span, a Attempt) {
	if !span.IsRecording() {
		span.End()
		return
	}
	buf := getAttrs()
	attrs := append(buf[:0], attribute.Int(AttrAttempt, a.N))
	defer func() { putAttrs(buf, len(attrs)) }()
	if a.N > 1 {
		attrs = append(attrs, attribute.Int("http.request.resend_count", a.N-1))
	}
	if r := a.Request; r != nil {
		span.SetName(t.names.attemptName(r.Method, r.URL.Path))
		attrs = append(attrs,
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
			attribute.String("server.address", r.URL.Hostname()))
		// No port: the scheme's default, which server.port leaves out. Atoi("") would
		// build an error to say so.
		if port := r.URL.Port(); port != "" {
			if p, err := strconv.Atoi(port); err == nil {
				attrs = append(attrs, attribute.Int("server.port", p))
			}
		}
	}
	if a.Status > 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", a.Status))
	}
	switch {
	case a.ErrKind != "":
		attrs = append(attrs, attribute.String("error.type", a.ErrKind))
		span.SetStatus(codes.Error, "upstream "+a.ErrKind)
	case a.Status >= 400:
		attrs = append(attrs, attribute.String("error.type", strconv.Itoa(a.Status)))
		span.SetStatus(codes.Error, "")
	}
	span.SetAttributes(attrs...)
	span.End()
}
