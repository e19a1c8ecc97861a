package tracing

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP trace export is encoded here straight from the SDK's spans to protobuf bytes.
// OpenTelemetry's own OTLP/HTTP exporter goes through the generated collector package,
// which links gRPC and grpc-gateway into the binary: twice the binary and 7 MB more
// resident memory in every modelgate, tracing on or off. The wire format is small and
// stable (opentelemetry-proto, trace/v1 and collector/trace/v1); the tests decode what is
// encoded here with the generated packages.

// Field numbers of opentelemetry-proto messages.
const (
	fRequestResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	fResourceSpansResource = 1
	fResourceSpansScope    = 2 // scope_spans
	fResourceSpansSchema   = 3

	fResourceAttributes = 1

	fScopeSpansScope  = 1
	fScopeSpansSpans  = 2
	fScopeSpansSchema = 3

	fScopeName    = 1
	fScopeVersion = 2
	fScopeAttrs   = 3

	fSpanTraceID      = 1
	fSpanSpanID       = 2
	fSpanTraceState   = 3
	fSpanParentSpanID = 4
	fSpanName         = 5
	fSpanKind         = 6
	fSpanStart        = 7
	fSpanEnd          = 8
	fSpanAttributes   = 9
	fSpanDroppedAttrs = 10
	fSpanEvents       = 11
	fSpanDroppedEvts  = 12
	fSpanLinks        = 13
	fSpanDroppedLinks = 14
	fSpanStatus       = 15
	fSpanFlags        = 16

	fEventTime    = 1
	fEventName    = 2
	fEventAttrs   = 3
	fEventDropped = 4

	fLinkTraceID    = 1
	fLinkSpanID     = 2
	fLinkTraceState = 3
	fLinkAttrs      = 4
	fLinkDropped    = 5
	fLinkFlags      = 6

	fStatusMessage = 2
	fStatusCode    = 3

	fKeyValueKey   = 1
	fKeyValueValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5

	fArrayValues = 1
)

// Span flags: the W3C trace flags in the low byte, and whether the parent is remote.
const (
	flagsHasIsRemote = 0x100
	flagsIsRemote    = 0x200
)

// encoder appends protobuf messages. Every message is written in place, in one pass: its
// length, unknown until it is written, gets room for the varint it will most likely take
// (endMsg moves the message in the rare case it needs another size). Nothing is encoded twice
// or copied from a buffer of its own into its parent's.
type encoder struct{}

// Room reserved for the length of a message, by what it holds: a span or event is under
// 16 KB (two bytes) but for captured content; a batch's ScopeSpans and ResourceSpans are
// under 2 MB (three bytes).
const (
	reserveSmall = 1
	reserveSpan  = 2
	reserveBatch = 3
)

// beginMsg appends field num's key and room for a length of reserve bytes; the message's
// fields follow, and endMsg, given what beginMsg returned, writes the length.
func beginMsg(b []byte, num protowire.Number, reserve int) ([]byte, int) {
	b = appendTag(b, num, protowire.BytesType)
	for range reserve {
		b = append(b, 0)
	}
	return b, len(b)
}

// endMsg writes the length of the message that begins at start, after reserve bytes of room.
func endMsg(b []byte, start, reserve int) []byte {
	n := len(b) - start
	size := protowire.SizeVarint(uint64(n))
	at := start - reserve // where the length goes
	switch {
	case size < reserve:
		copy(b[at+size:], b[start:])
		b = b[:len(b)-(reserve-size)]
	case size > reserve:
		b = append(b, make([]byte, size-reserve)...)
		copy(b[at+size:], b[start:start+n])
	}
	// The varint overwrites its room: b's capacity holds it, so append writes in place.
	_ = protowire.AppendVarint(b[at:at], uint64(n))
	return b
}

// appendTag appends a field's key: one byte for fields 1–15, which are nearly all of them.
func appendTag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	if num < 16 {
		return append(b, byte(num)<<3|byte(typ))
	}
	return protowire.AppendVarint(b, protowire.EncodeTag(num, typ))
}

// appendLen appends a length: one byte below 128, as most keys, values and attributes are.
func appendLen(b []byte, n int) []byte {
	if n < 0x80 {
		return append(b, byte(n))
	}
	return protowire.AppendVarint(b, uint64(n))
}

func appendString(dst []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return dst
	}
	dst = appendTag(dst, num, protowire.BytesType)
	dst = appendLen(dst, len(s))
	return append(dst, s...)
}

func appendRawBytes(dst []byte, num protowire.Number, b []byte) []byte {
	dst = appendTag(dst, num, protowire.BytesType)
	dst = appendLen(dst, len(b))
	return append(dst, b...)
}

func appendVarint(dst []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return dst
	}
	dst = appendTag(dst, num, protowire.VarintType)
	return protowire.AppendVarint(dst, v)
}

func appendFixed64(dst []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return dst
	}
	dst = appendTag(dst, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(dst, v)
}

func appendFixed32(dst []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return dst
	}
	dst = appendTag(dst, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(dst, v)
}

// resourceGroup is the spans of one resource, by instrumentation scope.
type resourceGroup struct {
	res    *resource.Resource
	scopes []scopeGroup
}

type scopeGroup struct {
	scope instrumentation.Scope
	spans []sdktrace.ReadOnlySpan
}

// groupSpans sorts spans by resource and scope, keeping their order. One provider makes all
// of modelgate's spans, so there is one group in practice, which holds spans itself rather
// than a copy; a linear search suffices for the others.
func groupSpans(spans []sdktrace.ReadOnlySpan) []resourceGroup {
	var rgs []resourceGroup
	for i, s := range spans {
		if s == nil {
			continue
		}
		res, scope := s.Resource(), s.InstrumentationScope()
		ri := -1
		for i := range rgs {
			if rgs[i].res == res || rgs[i].res.Equal(res) {
				ri = i
				break
			}
		}
		if ri < 0 {
			if len(rgs) == 0 && allOf(spans[i+1:], res, scope) {
				return []resourceGroup{{res: res, scopes: []scopeGroup{{scope: scope, spans: spans[i:]}}}}
			}
			rgs = append(rgs, resourceGroup{res: res})
			ri = len(rgs) - 1
		}
		rg := &rgs[ri]
		si := -1
		for i := range rg.scopes {
			if rg.scopes[i].scope == scope {
				si = i
				break
			}
		}
		if si < 0 {
			rg.scopes = append(rg.scopes, scopeGroup{scope: scope})
			si = len(rg.scopes) - 1
		}
		rg.scopes[si].spans = append(rg.scopes[si].spans, s)
	}
	return rgs
}

// allOf reports whether every span is of res and scope (nil spans aside).
func allOf(spans []sdktrace.ReadOnlySpan, res *resource.Resource, scope instrumentation.Scope) bool {
	for _, s := range spans {
		if s == nil {
			return false // let the general path skip it
		}
		if r := s.Resource(); r != res && !r.Equal(res) || s.InstrumentationScope() != scope {
			return false
		}
	}
	return true
}

// encodeRequest appends an ExportTraceServiceRequest holding spans to dst.
func (e *encoder) encodeRequest(dst []byte, spans []sdktrace.ReadOnlySpan) []byte {
	for _, rg := range groupSpans(spans) {
		var rs, r int
		dst, rs = beginMsg(dst, fRequestResourceSpans, reserveBatch)
		dst, r = beginMsg(dst, fResourceSpansResource, reserveSpan)
		dst = appendAttrs(dst, fResourceAttributes, rg.res.Attributes())
		dst = endMsg(dst, r, reserveSpan)
		for _, sg := range rg.scopes {
			dst = encodeScopeSpans(dst, sg)
		}
		dst = appendString(dst, fResourceSpansSchema, rg.res.SchemaURL())
		dst = endMsg(dst, rs, reserveBatch)
	}
	return dst
}

func encodeScopeSpans(b []byte, g scopeGroup) []byte {
	var ss, sc int
	b, ss = beginMsg(b, fResourceSpansScope, reserveBatch)
	b, sc = beginMsg(b, fScopeSpansScope, reserveSmall)
	b = appendString(b, fScopeName, g.scope.Name)
	b = appendString(b, fScopeVersion, g.scope.Version)
	b = appendAttrs(b, fScopeAttrs, g.scope.Attributes.ToSlice())
	b = endMsg(b, sc, reserveSmall)
	for _, s := range g.spans {
		if s == nil {
			continue
		}
		var sp int
		b, sp = beginMsg(b, fScopeSpansSpans, reserveSpan)
		b = encodeSpan(b, s)
		b = endMsg(b, sp, reserveSpan)
	}
	b = appendString(b, fScopeSpansSchema, g.scope.SchemaURL)
	return endMsg(b, ss, reserveBatch)
}

// encodeSpan appends one Span's fields.
func encodeSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendRawBytes(b, fSpanTraceID, tid[:])
	b = appendRawBytes(b, fSpanSpanID, sid[:])
	b = appendString(b, fSpanTraceState, sc.TraceState().String())
	flags := uint32(sc.TraceFlags()) | flagsHasIsRemote
	if p := s.Parent(); p.IsValid() {
		psid := p.SpanID()
		b = appendRawBytes(b, fSpanParentSpanID, psid[:])
		if p.IsRemote() {
			flags |= flagsIsRemote
		}
	}
	b = appendString(b, fSpanName, s.Name())
	b = appendVarint(b, fSpanKind, uint64(spanKind(s.SpanKind())))
	b = appendFixed64(b, fSpanStart, unixNano(s.StartTime().UnixNano()))
	b = appendFixed64(b, fSpanEnd, unixNano(s.EndTime().UnixNano()))
	b = appendAttrs(b, fSpanAttributes, s.Attributes())
	b = appendVarint(b, fSpanDroppedAttrs, uint64(clampUint32(s.DroppedAttributes())))
	for _, ev := range s.Events() {
		var m int
		b, m = beginMsg(b, fSpanEvents, reserveSpan)
		b = appendFixed64(b, fEventTime, unixNano(ev.Time.UnixNano()))
		b = appendString(b, fEventName, ev.Name)
		b = appendAttrs(b, fEventAttrs, ev.Attributes)
		b = appendVarint(b, fEventDropped, uint64(clampUint32(ev.DroppedAttributeCount)))
		b = endMsg(b, m, reserveSpan)
	}
	b = appendVarint(b, fSpanDroppedEvts, uint64(clampUint32(s.DroppedEvents())))
	for _, l := range s.Links() {
		var m int
		b, m = beginMsg(b, fSpanLinks, reserveSpan)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		b = appendRawBytes(b, fLinkTraceID, ltid[:])
		b = appendRawBytes(b, fLinkSpanID, lsid[:])
		b = appendString(b, fLinkTraceState, l.SpanContext.TraceState().String())
		b = appendAttrs(b, fLinkAttrs, l.Attributes)
		b = appendVarint(b, fLinkDropped, uint64(clampUint32(l.DroppedAttributeCount)))
		lf := uint32(l.SpanContext.TraceFlags()) | flagsHasIsRemote
		if l.SpanContext.IsRemote() {
			lf |= flagsIsRemote
		}
		b = appendFixed32(b, fLinkFlags, lf)
		b = endMsg(b, m, reserveSpan)
	}
	b = appendVarint(b, fSpanDroppedLinks, uint64(clampUint32(s.DroppedLinks())))
	if st := s.Status(); st.Code != codes.Unset || st.Description != "" {
		var m int
		b, m = beginMsg(b, fSpanStatus, reserveSmall)
		b = appendString(b, fStatusMessage, st.Description)
		b = appendVarint(b, fStatusCode, uint64(statusCode(st.Code)))
		b = endMsg(b, m, reserveSmall)
	}
	return appendFixed32(b, fSpanFlags, flags)
}

// appendAttrs appends each attribute as a KeyValue field num. A span's attributes are most of
// an export, so each is written in one pass: a key and value under 128 bytes, as nearly all
// are, leave their one byte of room for the length as it is.
func appendAttrs(b []byte, num protowire.Number, attrs []attribute.KeyValue) []byte {
	for _, kv := range attrs {
		var m, vm int
		b, m = beginMsg(b, num, reserveSmall)
		b = appendString(b, fKeyValueKey, string(kv.Key))
		b, vm = beginMsg(b, fKeyValueValue, reserveSmall)
		b = appendValue(b, kv.Value)
		b = endMsg(b, vm, reserveSmall)
		b = endMsg(b, m, reserveSmall)
	}
	return b
}

// appendValue appends an AnyValue's one field. Zero values are written too: an AnyValue
// with no field set would read as empty rather than false or 0.
func appendValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return appendBool(b, v.AsBool())
	case attribute.INT64:
		return appendInt(b, v.AsInt64())
	case attribute.FLOAT64:
		return appendDouble(b, v.AsFloat64())
	case attribute.STRING:
		return appendAnyString(b, v.AsString())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), appendBool)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), appendInt)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), appendDouble)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), appendAnyString)
	}
	// An unknown type is sent as its string form rather than dropped.
	return appendAnyString(b, v.Emit())
}

// appendArray appends an ArrayValue of xs, each element an AnyValue written by el.
func appendArray[T any](b []byte, xs []T, el func([]byte, T) []byte) []byte {
	var a int
	b, a = beginMsg(b, fAnyArray, reserveSpan)
	for _, x := range xs {
		var m int
		b, m = beginMsg(b, fArrayValues, reserveSmall)
		b = el(b, x)
		b = endMsg(b, m, reserveSmall)
	}
	return endMsg(b, a, reserveSpan)
}

func appendBool(b []byte, x bool) []byte {
	b = appendTag(b, fAnyBool, protowire.VarintType)
	return protowire.AppendVarint(b, protowire.EncodeBool(x))
}

func appendInt(b []byte, x int64) []byte {
	b = appendTag(b, fAnyInt, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(x))
}

func appendDouble(b []byte, x float64) []byte {
	b = appendTag(b, fAnyDouble, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(x))
}

func appendAnyString(b []byte, x string) []byte {
	b = appendTag(b, fAnyString, protowire.BytesType)
	b = appendLen(b, len(x))
	return append(b, x...)
}

// spanKind is the OTLP enum of a span kind (SPAN_KIND_INTERNAL = 1 ... CONSUMER = 5).
func spanKind(k trace.SpanKind) int {
	switch k {
	case trace.SpanKindInternal:
		return 1
	case trace.SpanKindServer:
		return 2
	case trace.SpanKindClient:
		return 3
	case trace.SpanKindProducer:
		return 4
	case trace.SpanKindConsumer:
		return 5
	}
	return 0
}

// statusCode is the OTLP enum of a status (UNSET 0, OK 1, ERROR 2).
func statusCode(c codes.Code) int {
	switch c {
	case codes.Ok:
		return 1
	case codes.Error:
		return 2
	}
	return 0
}

func unixNano(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

func clampUint32(n int) uint32 {
	if n < 0 {
		return 0
	}
	if n > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(n)
}
