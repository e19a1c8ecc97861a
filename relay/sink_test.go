package relay

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"modelgate/accounting"
	"modelgate/ratelimit"
)

// eventSink is a response writer that takes events whole, as a WebSocket turn's does; fail,
// when set, refuses the event of that type (a steer, a client gone).
type eventSink struct {
	*httptest.ResponseRecorder
	typs  []string
	datas []string
	fail  string
}

func (s *eventSink) Event(typ string, data []byte) error {
	if typ == s.fail {
		return errors.New("the sink takes no more")
	}
	s.typs = append(s.typs, typ)
	s.datas = append(s.datas, string(data))
	return nil
}

// wrapper is a middleware's writer around another (gin's, the overhead header's).
type wrapper struct{ http.ResponseWriter }

func (w wrapper) Unwrap() http.ResponseWriter { return w.ResponseWriter }
func (w wrapper) Flush()                      {}

// selfWrapper unwraps to itself: SinkOf must not walk it forever.
type selfWrapper struct{ *httptest.ResponseRecorder }

func (w *selfWrapper) Unwrap() http.ResponseWriter { return w }

func TestSinkOf(t *testing.T) {
	sink := &eventSink{ResponseRecorder: httptest.NewRecorder()}
	self := &selfWrapper{httptest.NewRecorder()}
	cases := []struct {
		name string
		w    http.ResponseWriter
		want Sink
	}{
		{"the sink itself", sink, sink},
		{"under two wrappers", wrapper{wrapper{sink}}, sink},
		{"an HTTP client", wrapper{httptest.NewRecorder()}, nil},
		{"a wrapper of nothing", wrapper{}, nil},
		{"a wrapper of itself", self, nil},
	}
	for _, tc := range cases {
		if got := SinkOf(tc.w); got != tc.want {
			t.Errorf("%s: SinkOf = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A sink gets each event whole and typed (by its event: name, or its data's type), not the
// comments, no SSE bytes and no keep-alive; a stream that breaks ends with the error event,
// whole too. The charge is the HTTP path's. The sink is found under a response writer's
// wrappers, or is the writer's only client (SinkWriter, a background job's), whose writer
// refuses bytes so that a pump that writes bytes sees a client that left.
func TestResponsesRelayToSink(t *testing.T) {
	noName := "data: {\"type\":\"response.in_progress\",\"response\":{}}\n\n"
	cases := []struct {
		name, upstream string
		wantTypes      string
		want           accounting.Charge
	}{
		{"complete", created + ": thinking\n\n" + noName + delta + complete, "response.created response.in_progress response.output_text.delta response.completed",
			accounting.Known(ratelimit.Usage{InputTokens: 4, OutputTokens: 2})},
		{"truncated", created + delta, "response.created response.output_text.delta error",
			accounting.UpperBound(reserve, ratelimit.Usage{InputTokens: 10, OutputTokens: 1}, accounting.StreamCut)},
	}
	writers := []struct {
		name string
		out  func(*eventSink) *Writer
	}{
		{"under_a_response_writer", func(s *eventSink) *Writer { return NewWriter(wrapper{s}, time.Millisecond) }},
		{"sink_writer", func(s *eventSink) *Writer { return SinkWriter(s) }},
	}
	for _, wr := range writers {
		for _, tc := range cases {
			t.Run(wr.name+"/"+tc.name, func(t *testing.T) {
				sink := &eventSink{ResponseRecorder: httptest.NewRecorder()}
				obs := &record{}
				p := &Pump{Out: wr.out(sink), Obs: obs, Client: context.Background(), Reserve: reserve}
				ch := p.Responses(strings.NewReader(tc.upstream), func() {})
				defer p.Out.Stop()
				if ch != tc.want {
					t.Errorf("charge %+v, want %+v", ch, tc.want)
				}
				if got := strings.Join(sink.typs, " "); got != tc.wantTypes {
					t.Errorf("the sink got %s, want %s", got, tc.wantTypes)
				}
				if sink.Body.Len() != 0 {
					t.Errorf("the sink's writer got bytes: %q", sink.Body.String())
				}
				if p.Out.timer != nil {
					t.Error("a keep-alive timer runs for a sink")
				}
				if tc.name == "complete" && obs.sent != len(sink.typs) {
					t.Errorf("%d writes noted sent for %d events (a comment is not sent)", obs.sent, len(sink.typs))
				}
				last := sink.datas[len(sink.datas)-1]
				if tc.name == "truncated" && !strings.HasPrefix(last, `{"type":"error","code":"upstream_stream_ended"`) {
					t.Errorf("the error event's data %s", last)
				}
				if tc.name == "complete" && last != complete[strings.Index(complete, "{"):len(complete)-2] {
					t.Errorf("the terminal event's data %s, not as sent", last)
				}
				if wr.name != "sink_writer" {
					return
				}
				if err := p.Out.Write([]byte("data: {}\n\n")); !errors.Is(err, errNoBytes) || !errors.Is(p.Out.Err(), errNoBytes) {
					t.Errorf("bytes written to a sink's writer: %v (Err %v), want them refused", err, p.Out.Err())
				}
			})
		}
	}
}

// A sink that refuses an event ends the relay as a client that left: what is in flight is
// counted, and nothing more is handed to it.
func TestResponsesRelaySinkRefuses(t *testing.T) {
	sink := &eventSink{ResponseRecorder: httptest.NewRecorder(), fail: "response.output_text.delta"}
	obs := &record{}
	p := &Pump{Out: NewWriter(sink, 0), Obs: obs, Client: context.Background(), Reserve: reserve}
	ch := p.Responses(strings.NewReader(created+delta+delta+complete), func() {})
	if !obs.clientGone || len(sink.typs) != 1 {
		t.Fatalf("client gone %t, events after the refusal %v", obs.clientGone, sink.typs)
	}
	if ch != accounting.Known(ratelimit.Usage{InputTokens: 4, OutputTokens: 2}) {
		t.Fatalf("charge %+v: the terminal usage in flight was not counted", ch)
	}
}
