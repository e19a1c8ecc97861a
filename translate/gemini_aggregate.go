package translate

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"
)

// GeminiAggregator builds one GenerateContentResponse from an upstream event stream, for a
// non-stream generateContent with stop sequences: streamed upstream, the answer can be ended
// (and the platform stopped) as soon as a sequence appears. It runs the stream converter and
// joins its chunks the way the SDKs join a stream's text, so the stream and the non-stream
// answer cannot drift apart.
type GeminiAggregator struct {
	streamJoin
	conv   *GeminiStream
	parts  []geminiAggPart
	finish string // the last chunk's finishReason
}

// geminiAggPart is one part of the answer: text or thought text joined from consecutive
// chunks, or a function call's JSON as the converter wrote it.
type geminiAggPart struct {
	kind byte // 't' text, 'h' thought, 'c' function call
	text strings.Builder
	call string
	sig  string
}

// NewGeminiAggregator prepares an aggregator for one upstream stream.
func NewGeminiAggregator(meta GeminiMeta) *GeminiAggregator {
	a := &GeminiAggregator{conv: NewGeminiStream(GeminiSSE, meta)}
	a.streamJoin = streamJoin{base: &a.conv.streamBase, take: a.take}
	return a
}

// take accumulates the converter's SSE chunks, "data: {json}\r\n\r\n" one after another.
func (a *GeminiAggregator) take(out []byte) {
	for len(out) > 0 {
		end := bytes.Index(out, []byte("\r\n\r\n"))
		if end < 0 {
			return
		}
		data := bytes.TrimPrefix(out[:end], []byte("data: "))
		out = out[end+4:]
		cand := gjson.GetBytes(data, "candidates.0")
		if f := cand.Get("finishReason"); f.Type == gjson.String {
			a.finish = strings.Clone(f.Str)
		}
		cand.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
			a.add(p)
			return true
		})
	}
}

// add joins one part to the answer: text to the text before it, unless a signature or a
// change between thought and answer starts a new part.
func (a *GeminiAggregator) add(p gjson.Result) {
	sig := strings.Clone(p.Get("thoughtSignature").Str)
	if fc := p.Get("functionCall"); fc.Exists() {
		a.parts = append(a.parts, geminiAggPart{kind: 'c', call: strings.Clone(fc.Raw), sig: sig})
		return
	}
	text := p.Get("text").Str
	if text == "" && sig == "" {
		return
	}
	kind := byte('t')
	if p.Get("thought").Type == gjson.True {
		kind = 'h'
	}
	if n := len(a.parts); n > 0 && a.parts[n-1].kind == kind && sig == "" {
		a.parts[n-1].text.WriteString(text)
		return
	}
	a.parts = append(a.parts, geminiAggPart{kind: kind, sig: sig})
	a.parts[len(a.parts)-1].text.WriteString(text)
}

// Result renders the answer, or the *Error of a failed or unfinished one.
func (a *GeminiAggregator) Result() ([]byte, Usage, error) {
	c := a.conv
	u := c.Usage()
	if e := a.failed(a.finish != ""); e != nil {
		return nil, u, e
	}
	b := make([]byte, 0, 512)
	b = append(b, `{"candidates":[{"content":{"parts":[`...)
	start := len(b)
	for i := range a.parts {
		p := &a.parts[i]
		b = sepBlock(b, start)
		if p.kind == 'c' {
			b = append(b, `{"functionCall":`...)
			b = append(b, p.call...)
		} else {
			b = append(b, `{"text":`...)
			b = appendString(b, p.text.String())
			if p.kind == 'h' {
				b = append(b, `,"thought":true`...)
			}
		}
		if p.sig != "" {
			b = append(b, `,"thoughtSignature":`...)
			b = appendString(b, p.sig)
		}
		b = append(b, '}')
	}
	b = append(b, `],"role":"model"},"finishReason":`...)
	b = appendString(b, a.finish)
	b = append(b, `,"index":`...)
	b = appendInt(b, int64(c.meta.Index))
	b = append(b, `}],"usageMetadata":`...)
	b = appendGeminiUsage(b, u)
	b = appendGeminiTrailer(b, &c.meta, c.respID, c.model)
	return append(b, '}'), u, nil
}
