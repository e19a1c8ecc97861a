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

// encoder appends protobuf messages. A nested message is encoded into the scratch buffer of
// its depth, then copied into its parent with its length; the buffers are reused from
// export to export.
type encoder struct {
	scratch [10][]byte // deepest: an array element of an event attribute, at 8
}

// nested encodes a message at depth d with fn and appends it to dst as field num.
func (e *encoder) nested(dst []byte, num protowire.Number, d int, fn func(b []byte) []byte) []byte {
	b := fn(e.scratch[d][:0])
	e.scratch[d] = b
	dst = appendTag(dst, num, protowire.BytesType)
	dst = appendLen(dst, len(b))
	return append(dst, b...)
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
// of modelgate's spans, so there is one group in practice; a linear search suffices.
func groupSpans(spans []sdktrace.ReadOnlySpan) []resourceGroup {
	var rgs []resourceGroup
	for _, s := range spans {
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

// encodeRequest appends an ExportTraceServiceRequest holding spans to dst. Depths: a
// ResourceSpans 0, its Resource and ScopeSpans 1, a Scope and Span 2, a span's attributes,
// events, links and status 4 and below.
func (e *encoder) encodeRequest(dst []byte, spans []sdktrace.ReadOnlySpan) []byte {
	for _, rg := range groupSpans(spans) {
		dst = e.nested(dst, fRequestResourceSpans, 0, func(b []byte) []byte {
			b = e.nested(b, fResourceSpansResource, 1, func(b []byte) []byte {
				return e.appendAttrs(b, fResourceAttributes, 2, rg.res.Attributes())
			})
			for _, sg := range rg.scopes {
				b = e.nested(b, fResourceSpansScope, 1, func(b []byte) []byte { return e.encodeScopeSpans(b, sg) })
			}
			return appendString(b, fResourceSpansSchema, rg.res.SchemaURL())
		})
	}
	return dst
}

func (e *encoder) encodeScopeSpans(b []byte, g scopeGroup) []byte {
	b = e.nested(b, fScopeSpansScope, 2, func(b []byte) []byte {
		b = appendString(b, fScopeName, g.scope.Name)
		b = appendString(b, fScopeVersion, g.scope.Version)
		return e.appendAttrs(b, fScopeAttrs, 3, g.scope.Attributes.ToSlice())
	})
	for _, s := range g.spans {
		b = e.nested(b, fScopeSpansSpans, 2, func(b []byte) []byte { return e.encodeSpan(b, s) })
	}
	return appendString(b, fScopeSpansSchema, g.scope.SchemaURL)
}

// encodeSpan appends one Span's fields; its children are encoded at depth 4 and below.
func (e *encoder) encodeSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
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
	b = e.appendAttrs(b, fSpanAttributes, 4, s.Attributes())
	b = appendVarint(b, fSpanDroppedAttrs, uint64(clampUint32(s.DroppedAttributes())))
	for _, ev := range s.Events() {
		b = e.nested(b, fSpanEvents, 4, func(b []byte) []byte {
			b = appendFixed64(b, fEventTime, unixNano(ev.Time.UnixNano()))
			b = appendString(b, fEventName, ev.Name)
			b = e.appendAttrs(b, fEventAttrs, 5, ev.Attributes)
			return appendVarint(b, fEventDropped, uint64(clampUint32(ev.DroppedAttributeCount)))
		})
	}
	b = appendVarint(b, fSpanDroppedEvts, uint64(clampUint32(s.DroppedEvents())))
	for _, l := range s.Links() {
		b = e.nested(b, fSpanLinks, 4, func(b []byte) []byte {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = appendRawBytes(b, fLinkTraceID, ltid[:])
			b = appendRawBytes(b, fLinkSpanID, lsid[:])
			b = appendString(b, fLinkTraceState, l.SpanContext.TraceState().String())
			b = e.appendAttrs(b, fLinkAttrs, 5, l.Attributes)
			b = appendVarint(b, fLinkDropped, uint64(clampUint32(l.DroppedAttributeCount)))
			lf := uint32(l.SpanContext.TraceFlags()) | flagsHasIsRemote
			if l.SpanContext.IsRemote() {
				lf |= flagsIsRemote
			}
			return appendFixed32(b, fLinkFlags, lf)
		})
	}
	b = appendVarint(b, fSpanDroppedLinks, uint64(clampUint32(s.DroppedLinks())))
	if st := s.Status(); st.Code != codes.Unset || st.Description != "" {
		b = e.nested(b, fSpanStatus, 4, func(b []byte) []byte {
			b = appendString(b, fStatusMessage, st.Description)
			return appendVarint(b, fStatusCode, uint64(statusCode(st.Code)))
		})
	}
	return appendFixed32(b, fSpanFlags, flags)
}

// appendAttrs appends each attribute as a KeyValue field num. A span's attributes are most of
// an export, so each is written straight into b: its value is encoded once into the scratch
// buffer of depth d+1 (array elements below it), and the KeyValue's length follows from the
// key's and the value's, with no message of its own to copy.
func (e *encoder) appendAttrs(b []byte, num protowire.Number, d int, attrs []attribute.KeyValue) []byte {
	for _, kv := range attrs {
		val := e.appendValue(e.scratch[d+1][:0], d+2, kv.Value)
		e.scratch[d+1] = val
		key := string(kv.Key)
		size := 1 + protowire.SizeBytes(len(val))
		if key != "" {
			size += 1 + protowire.SizeBytes(len(key))
		}
		b = appendTag(b, num, protowire.BytesType)
		b = appendLen(b, size)
		b = appendString(b, fKeyValueKey, key)
		b = appendRawBytes(b, fKeyValueValue, val)
	}
	return b
}

// appendValue appends an AnyValue's one field. Zero values are written too: an AnyValue
// with no field set would read as empty rather than false or 0. An array is encoded at
// depth d, its elements at d+1.
func (e *encoder) appendValue(b []byte, d int, v attribute.Value) []byte {
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
		return appendArray(e, b, d, v.AsBoolSlice(), appendBool)
	case attribute.INT64SLICE:
		return appendArray(e, b, d, v.AsInt64Slice(), appendInt)
	case attribute.FLOAT64SLICE:
		return appendArray(e, b, d, v.AsFloat64Slice(), appendDouble)
	case attribute.STRINGSLICE:
		return appendArray(e, b, d, v.AsStringSlice(), appendAnyString)
	}
	// An unknown type is sent as its string form rather than dropped.
	return appendAnyString(b, v.Emit())
}

// appendArray appends an ArrayValue of xs, each element an AnyValue written by el.
func appendArray[T any](e *encoder, b []byte, d int, xs []T, el func([]byte, T) []byte) []byte {
	return e.nested(b, fAnyArray, d, func(b []byte) []byte {
		for _, x := range xs {
			b = e.nested(b, fArrayValues, d+1, func(b []byte) []byte { return el(b, x) })
		}
		return b
	})
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
