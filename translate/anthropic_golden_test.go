package translate

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// The Messages dialect is tested against the same recorded upstream answers and streams as
// chat (testdata/answers, testdata/streams) plus its own (testdata/anthropic); its goldens
// live under testdata/anthropic.

func baseMessagesMeta() MessagesMeta { return MessagesMeta{ID: "msg_test", Model: "client-model"} }

// loadMessagesMeta reads a case's meta: a chat meta's Stop becomes the stop sequences, so the
// chat recordings exercise the same emulation; a messages meta is read as is.
func loadMessagesMeta(t *testing.T, path string) MessagesMeta {
	t.Helper()
	m := baseMessagesMeta()
	var raw struct {
		Stop          []string
		StopSequences []string
	}
	overlayJSON(t, path, &raw)
	m.StopSequences = append(raw.StopSequences, raw.Stop...)
	return m
}

// anthropicErrorJSON renders an error result the way the proxy would answer it.
func anthropicErrorJSON(t *testing.T, err error) []byte {
	t.Helper()
	te := asError(t, err)
	status, typ := AnthropicStatus(te.HTTPStatus())
	return []byte(`{"status":` + itoa(status) + `,"body":` + string(AnthropicErrorJSON(typ, te.Message)) + `}`)
}

func TestMessagesGoldenRequests(t *testing.T) {
	eachCase(t, ".messages.json", []string{"testdata/anthropic/requests/*.messages.json"}, func(t *testing.T, base string, body []byte) {
		var got []byte
		if r, err := ParseMessages(body); err != nil {
			got = anthropicErrorJSON(t, err)
		} else {
			got = r.ToResponses("upstream-model", RequestOptions{})
		}
		checkGolden(t, base+".responses.golden.json", indent(t, got))
	})
}

func TestMessagesGoldenAnswers(t *testing.T) {
	checkDialectAnswers(t, "testdata/anthropic/answers/*.messages.golden.json", loadMessagesMeta, ResponseToMessage, anthropicErrorJSON)
}

// convertMessagesSSE runs a recorded upstream stream through a Messages converter the way
// the proxy does.
func convertMessagesSSE(r io.Reader, meta MessagesMeta) []byte {
	return feedSSE(r, NewMessagesStream(meta))
}

// eachMessagesStream runs f for every recorded stream, chat's and the dialect's own, with the
// path of its Messages golden.
func eachMessagesStream(t *testing.T, f func(t *testing.T, golden string, raw []byte, meta MessagesMeta)) {
	cases := []string{"testdata/streams/*.sse", "testdata/anthropic/streams/*.sse"}
	eachCase(t, ".sse", cases, func(t *testing.T, base string, raw []byte) {
		golden := filepath.Join("testdata/anthropic/streams", filepath.Base(base)+".events.golden")
		f(t, golden, raw, loadMessagesMeta(t, base+".meta.json"))
	})
}

func TestMessagesGoldenStreams(t *testing.T) {
	eachMessagesStream(t, func(t *testing.T, golden string, raw []byte, meta MessagesMeta) {
		checkGolden(t, golden, convertMessagesSSE(bytes.NewReader(raw), meta))

		got, _, err := aggregateMessagesSSE(bytes.NewReader(raw), meta)
		if err != nil {
			got = anthropicErrorJSON(t, err)
		}
		checkGolden(t, strings.TrimSuffix(golden, ".events.golden")+".aggregate.golden.json", indent(t, got))
	})
}

// aggregateMessagesSSE runs a recorded stream through a MessagesAggregator the way the proxy
// serves a non-stream client with stop sequences.
func aggregateMessagesSSE(r io.Reader, meta MessagesMeta) ([]byte, Usage, error) {
	return aggregateDialectSSE(r, NewMessagesAggregator(meta))
}

// A completed stream aggregates to the answer ResponseToMessage gives for its final response,
// byte for byte.
func TestMessagesAggregateMatchesAnswer(t *testing.T) {
	eachMessagesStream(t, func(t *testing.T, _ string, raw []byte, meta MessagesMeta) {
		checkAggregateMatchesAnswer(t, raw, len(meta.StopSequences),
			func(r io.Reader) ([]byte, Usage, error) { return aggregateMessagesSSE(r, meta) },
			func(final []byte) ([]byte, Usage, error) { return ResponseToMessage(final, meta) },
			func(answer []byte) string { return string(answer) })
	})
}

// TestMessagesStreamSplitAtEveryByte: the output must not depend on how the upstream bytes
// arrive.
func TestMessagesStreamSplitAtEveryByte(t *testing.T) {
	eachMessagesStream(t, func(t *testing.T, _ string, raw []byte, meta MessagesMeta) {
		checkSplitAtEveryByte(t, raw, func(r io.Reader) []byte { return convertMessagesSSE(r, meta) })
	})
}
