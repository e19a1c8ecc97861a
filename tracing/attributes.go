package tracing

import (
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// GenAI semantic convention attributes (the OpenTelemetry GenAI registry, development status).
const (
	AttrOperationName      = "gen_ai.operation.name"
	AttrProviderName       = "gen_ai.provider.name"
	AttrRequestModel       = "gen_ai.request.model"
	AttrResponseModel      = "gen_ai.response.model"
	AttrMaxTokens          = "gen_ai.request.max_tokens"
	AttrTemperature        = "gen_ai.request.temperature"
	AttrResponseID         = "gen_ai.response.id"
	AttrFinishReasons      = "gen_ai.response.finish_reasons"
	AttrInputTokens        = "gen_ai.usage.input_tokens"
	AttrOutputTokens       = "gen_ai.usage.output_tokens"
	AttrInputMessages      = "gen_ai.input.messages"
	AttrSystemInstructions = "gen_ai.system_instructions"
	AttrOutputMessages     = "gen_ai.output.messages"
)

// modelgate's own attributes. Never the key itself: only the key's configured name.
const (
	AttrRequestID      = "modelgate.request_id"
	AttrTeam           = "modelgate.team"
	AttrKeyName        = "modelgate.key_name"
	AttrAttempts       = "modelgate.attempts"
	AttrAttempt        = "modelgate.attempt"
	AttrLimitDecision  = "modelgate.limit.decision"
	AttrLimitReason    = "modelgate.limit.reason"
	AttrTTFB           = "modelgate.time_to_first_byte"
	AttrStream         = "modelgate.stream"
	AttrEventsReceived = "modelgate.stream.events_received"
	AttrEventsSent     = "modelgate.stream.events_sent"
	AttrErrorCode      = "modelgate.error_code"
	AttrUpstreamError  = "modelgate.upstream_error"
	AttrServedModel    = "modelgate.served_model" // the fallback that served the answer
	AttrTruncated      = "modelgate.content.truncated"
	AttrContentBytes   = "modelgate.content.bytes"
)

// Span event names for captured content.
const (
	EventPrompt     = "gen_ai.content.prompt"
	EventCompletion = "gen_ai.content.completion"
)

// OperationChat is gen_ai.operation.name for chat completions, Responses and Messages calls.
const OperationChat = "chat"

// Provider is gen_ai.provider.name. The platform is reached through its OpenAI-compatible
// Responses gateway, and the attribute names the telemetry flavour (OpenAI's request and
// response shapes), which is how the conventions use it.
const Provider = "openai"

// GenAI is what one GenAI route learned of a call: the request's fields as the client sent
// them, the platform's answer, and the usage charged. A route fills it in as it goes;
// EndServer puts it on the span when the request ends.
type GenAI struct {
	Operation      string // OperationChat
	RequestModel   string // the model the client asked for
	MaxTokens      int64  // 0: not set
	Temperature    float64
	HasTemperature bool
	ResponseID     string
	ResponseModel  string
	FinishReasons  []string
	InputTokens    int64
	OutputTokens   int64
}

// AppendGenAI appends g's GenAI attributes to attrs, leaving out what is unknown.
func AppendGenAI(attrs []attribute.KeyValue, g *GenAI) []attribute.KeyValue {
	op := g.Operation
	if op == "" {
		op = OperationChat
	}
	attrs = append(attrs, attribute.String(AttrOperationName, op), attribute.String(AttrProviderName, Provider))
	if g.RequestModel != "" {
		attrs = append(attrs, attribute.String(AttrRequestModel, g.RequestModel))
	}
	if g.MaxTokens > 0 {
		attrs = append(attrs, attribute.Int64(AttrMaxTokens, g.MaxTokens))
	}
	if g.HasTemperature {
		attrs = append(attrs, attribute.Float64(AttrTemperature, g.Temperature))
	}
	if g.ResponseID != "" {
		attrs = append(attrs, attribute.String(AttrResponseID, g.ResponseID))
	}
	if g.ResponseModel != "" {
		attrs = append(attrs, attribute.String(AttrResponseModel, g.ResponseModel))
	}
	if len(g.FinishReasons) > 0 {
		attrs = append(attrs, finishReasons(g.FinishReasons))
	}
	if g.InputTokens > 0 || g.OutputTokens > 0 {
		attrs = append(attrs, attribute.Int64(AttrInputTokens, g.InputTokens), attribute.Int64(AttrOutputTokens, g.OutputTokens))
	}
	return attrs
}

// oneFinishReason is gen_ai.response.finish_reasons for the answers of one choice, which
// are nearly all; attribute values are immutable, so these are built once and shared
// rather than copied into a new array per request.
var oneFinishReason = func() map[string]attribute.KeyValue {
	m := make(map[string]attribute.KeyValue)
	for _, r := range []string{"stop", "length", "tool_calls", "content_filter", "error", "incomplete"} {
		m[r] = attribute.StringSlice(AttrFinishReasons, []string{r})
	}
	return m
}()

func finishReasons(rs []string) attribute.KeyValue {
	if len(rs) == 1 {
		if kv, ok := oneFinishReason[rs[0]]; ok {
			return kv
		}
	}
	return attribute.StringSlice(AttrFinishReasons, rs)
}

// Outcome is how a request ended, as the server span reports it.
type Outcome struct {
	// Method and Route are the request's, as StartServer was given them (http.request.method
	// and http.route).
	Method, Route string
	RequestID     string
	Status        int
	Team, KeyName string
	Attempts      int
	// LimitDecision is "allowed" or "refused" when the limiter was asked, "" otherwise;
	// LimitReason is the limiter's refusal (or shadow refusal) reason.
	LimitDecision, LimitReason string
	Stream                     bool
	TTFB                       time.Duration
	EventsReceived, EventsSent int64
	ErrorCode, UpstreamError   string
	ServedModel                string // set when a fallback served the answer
	ClientGone                 bool
	// CutByShutdown: the connection was lost during a shutdown, most likely closed by the
	// drain's timeout rather than by the client.
	CutByShutdown bool
	// InputTokens and OutputTokens are the usage charged. Request.End reports them as a
	// GenAI call's usage; EndServer reads the usage from its GenAI instead.
	InputTokens, OutputTokens int64
}

// EndServer records the outcome on a server span, with g's GenAI attributes when g is set
// (a GenAI route), and ends it: all attributes in one call, which costs the SDK least. A
// client that left before the answer was complete ends it with an error status saying so.
func EndServer(span trace.Span, o Outcome, g *GenAI) {
	if !span.IsRecording() {
		span.End()
		return
	}
	buf := getAttrs()
	attrs := buf[:0]
	defer func() { putAttrs(buf, len(attrs)) }()
	if o.Method != "" {
		attrs = append(attrs, attribute.String("http.request.method", o.Method))
	}
	if o.Route != "" {
		attrs = append(attrs, attribute.String("http.route", o.Route))
	}
	if g != nil {
		attrs = AppendGenAI(attrs, g)
	}
	attrs = append(attrs, attribute.String(AttrRequestID, o.RequestID), attribute.Int("http.response.status_code", o.Status))
	if o.Team != "" {
		attrs = append(attrs, attribute.String(AttrTeam, o.Team))
	}
	if o.KeyName != "" {
		attrs = append(attrs, attribute.String(AttrKeyName, o.KeyName))
	}
	if o.Attempts > 0 {
		attrs = append(attrs, attribute.Int(AttrAttempts, o.Attempts))
	}
	if o.LimitDecision != "" {
		attrs = append(attrs, attribute.String(AttrLimitDecision, o.LimitDecision))
	}
	if o.LimitReason != "" {
		attrs = append(attrs, attribute.String(AttrLimitReason, o.LimitReason))
	}
	if o.Stream {
		attrs = append(attrs, attribute.Bool(AttrStream, true),
			attribute.Int64(AttrEventsReceived, o.EventsReceived), attribute.Int64(AttrEventsSent, o.EventsSent))
	}
	if o.TTFB > 0 {
		attrs = append(attrs, attribute.Float64(AttrTTFB, o.TTFB.Seconds()))
	}
	if o.ErrorCode != "" {
		attrs = append(attrs, attribute.String(AttrErrorCode, o.ErrorCode))
	}
	if o.UpstreamError != "" {
		attrs = append(attrs, attribute.String(AttrUpstreamError, o.UpstreamError))
	}
	if o.ServedModel != "" {
		attrs = append(attrs, attribute.String(AttrServedModel, o.ServedModel))
	}
	switch {
	case o.ClientGone && o.CutByShutdown:
		attrs = append(attrs, attribute.String("error.type", "shutdown"))
		span.SetStatus(codes.Error, "the connection was closed while modelgate shut down, before the answer was complete")
	case o.ClientGone:
		attrs = append(attrs, attribute.String("error.type", "client_closed_request"))
		span.SetStatus(codes.Error, "the client closed the connection before the answer was complete")
	case o.Status >= 500:
		// Server spans mark 5xx as errors; a 4xx is the caller's, not modelgate's.
		attrs = append(attrs, attribute.String("error.type", errorType(o)))
		span.SetStatus(codes.Error, "")
	case o.UpstreamError != "" && o.Stream:
		// A stream that began with 200 but ended early (idle, truncated, malformed).
		attrs = append(attrs, attribute.String("error.type", o.UpstreamError))
		span.SetStatus(codes.Error, "the stream ended early: "+o.UpstreamError)
	}
	span.SetAttributes(attrs...)
	span.End()
}

// attrBuf holds the attributes of one span's end: the most a server span gets is 26.
type attrBuf = [28]attribute.KeyValue

// attrBufs lends the attribute slices EndServer and EndAttempt build. SetAttributes copies
// each attribute into the span's own storage before it returns, so the slice is free again
// once it has; lending it saves a 2 KB allocation per traced request.
var attrBufs = sync.Pool{New: func() any { return new(attrBuf) }}

func getAttrs() *attrBuf { return attrBufs.Get().(*attrBuf) }

// putAttrs returns b once its first n attributes were used. Only those are cleared (so that
// no request's strings are held while it is pooled): the rest were cleared before.
func putAttrs(b *attrBuf, n int) {
	clear(b[:min(n, len(b))])
	attrBufs.Put(b)
}

func errorType(o Outcome) string {
	if o.ErrorCode != "" {
		return o.ErrorCode
	}
	if o.UpstreamError != "" {
		return o.UpstreamError
	}
	return "http_" + strconv.Itoa(o.Status)
}

// RecordContent adds a captured prompt or completion to span as the event name, holding at
// most max bytes of raw (cut on a character boundary) and saying when it was cut. The kept
// part is copied: raw may be a view of a buffer that is reused.
func RecordContent(span trace.Span, event, key, raw string, max int) {
	if max <= 0 || raw == "" {
		return
	}
	kept, cut := capUTF8(raw, max)
	kept = strings.Clone(kept)
	span.AddEvent(event, trace.WithAttributes(
		attribute.String(key, kept),
		attribute.Int(AttrContentBytes, len(raw)),
		attribute.Bool(AttrTruncated, cut),
	))
}

// capUTF8 returns at most max bytes of s, never splitting a character.
func capUTF8(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	end := max
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end], true
}
