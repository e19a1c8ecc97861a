package relay

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"modelgate/accounting"
	"modelgate/ratelimit"
	"modelgate/translate"
)

// record is a request record for the relay's reports.
type record struct {
	mu                   sync.Mutex
	events, sent         int
	responses            []string
	clientGone           bool
	upstreamErr          string
	deltasSeenByObserver int
}

func (r *record) Event(typ string, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events++
	if KindOf(typ, data) == KindDelta {
		r.deltasSeenByObserver++
	}
}
func (r *record) Sent() { r.mu.Lock(); r.sent++; r.mu.Unlock() }
func (r *record) Response(terminal []byte) {
	r.responses = append(r.responses, string(ResponseObject(terminal)))
}
func (r *record) ClientGone()                { r.clientGone = true }
func (r *record) UpstreamFailed(kind string) { r.upstreamErr = kind }

const (
	created  = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\n"
	delta    = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}\n\n"
	complete = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"HiHi\"}]}],\"usage\":{\"input_tokens\":4,\"output_tokens\":2}}}\n\n"
)

var reserve = ratelimit.Usage{InputTokens: 10, OutputTokens: 100}

func newPump(client context.Context, w FlushWriter, obs Observer) *Pump {
	return &Pump{Out: NewWriter(w, 0), Obs: obs, Client: client, Reserve: reserve}
}

// The Responses pass-through forwards every event byte for byte, hands the terminal response
// to the record before the client gets it, and charges what the platform reported; a stream
// that breaks ends with an error event and the reservation.
func TestResponsesRelay(t *testing.T) {
	cases := []struct {
		name, upstream string
		wantForwarded  string
		wantErrCode    string // the error event's code, "" for none
		want           accounting.Charge
		wantUpErr      string
	}{
		{"complete", created + delta + delta + complete, created + delta + delta + complete, "",
			accounting.Known(ratelimit.Usage{InputTokens: 4, OutputTokens: 2}), ""},
		{"truncated", created + delta, created + delta, "upstream_stream_ended",
			accounting.UpperBound(reserve, ratelimit.Usage{InputTokens: 10, OutputTokens: 1}, accounting.StreamCut), "reset"},
		{"garbage", created + "<html>oops</html>\n\n" + complete, created, "upstream_stream_invalid",
			accounting.UpperBound(reserve, ratelimit.Usage{InputTokens: 10}, accounting.StreamCut), "stream_invalid"},
		{"not_json", created + "data: {nope\n\n", created, "upstream_stream_invalid",
			accounting.UpperBound(reserve, ratelimit.Usage{InputTokens: 10}, accounting.StreamCut), "stream_invalid"},
		{"error_event", created + "event: error\ndata: {\"type\":\"error\",\"code\":\"x\"}\n\n", created + "event: error\ndata: {\"type\":\"error\",\"code\":\"x\"}\n\n", "",
			accounting.UpperBound(reserve, ratelimit.Usage{InputTokens: 10}, accounting.StreamCut), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			obs := &record{}
			cancelled := false
			ch := newPump(context.Background(), rec, obs).Responses(strings.NewReader(tc.upstream), func() { cancelled = true })
			if ch != tc.want {
				t.Errorf("charge %+v, want %+v", ch, tc.want)
			}
			got := rec.Body.String()
			forwarded, errEvent, _ := strings.Cut(got, "event: error\ndata: {\"type\":\"error\",\"code\":\"")
			if tc.wantErrCode == "" {
				forwarded = got
			}
			if forwarded != tc.wantForwarded || tc.wantErrCode != "" && !strings.HasPrefix(errEvent, tc.wantErrCode+"\"") {
				t.Errorf("client got %q", got)
			}
			if !cancelled || obs.upstreamErr != tc.wantUpErr || obs.clientGone {
				t.Errorf("cancelled %t, upstream error %q, client gone %t", cancelled, obs.upstreamErr, obs.clientGone)
			}
			if tc.name == "complete" && (len(obs.responses) != 1 || !strings.HasPrefix(obs.responses[0], `{"id":"resp_1"`) || obs.sent != 4 || obs.events != 4) {
				t.Errorf("record %+v", obs)
			}
		})
	}
}

// A client that leaves mid-stream is noted, and what the platform has in flight is counted
// before the call is cancelled: an early cut charges what was read.
func TestResponsesRelayClientLeaves(t *testing.T) {
	obs := &record{}
	p := newPump(context.Background(), &failAfter{n: 1}, obs)
	ch := p.Responses(strings.NewReader(created+delta+delta+complete), func() {})
	if !obs.clientGone {
		t.Fatal("the client's departure was not noted")
	}
	if ch != accounting.Known(ratelimit.Usage{InputTokens: 4, OutputTokens: 2}) {
		t.Fatalf("charge %+v: the terminal usage in flight was not counted", ch)
	}
}

// failAfter is a client that takes n writes, then is gone.
type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, io.ErrClosedPipe
	}
	f.n--
	return len(p), nil
}
func (f *failAfter) Flush() {}

func chatMeta() translate.Meta {
	return translate.Meta{ID: "chatcmpl-1", Created: 1, Model: "m"}
}

// The translated pump converts each event, ends with the converter's trailer and charges
// the platform's figures; a truncated stream is charged the reservation and named.
func TestDirectPump(t *testing.T) {
	cases := []struct {
		name, upstream string
		want           accounting.Charge
		wantUpErr      string
		wantTail       string
	}{
		{"complete", created + delta + delta + complete, accounting.Known(ratelimit.Usage{InputTokens: 4, OutputTokens: 2}), "", "data: [DONE]\n\n"},
		{"truncated", created + delta, accounting.UpperBound(reserve, ratelimit.Usage{InputTokens: 10, OutputTokens: 1}, accounting.StreamCut), "stream_truncated", "\n\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			obs := &record{}
			conv := translate.NewStreamConverter(chatMeta())
			conv.SetInputEstimate(reserve.InputTokens)
			ch := newPump(context.Background(), rec, obs).Direct(strings.NewReader(tc.upstream), func() {}, conv)
			if ch.Usage != tc.want.Usage || ch.Unknown != tc.want.Unknown {
				t.Errorf("charge %+v, want %+v", ch, tc.want)
			}
			body := rec.Body.String()
			if !strings.Contains(body, `"content":"Hi"`) || !strings.HasSuffix(body, tc.wantTail) || obs.upstreamErr != tc.wantUpErr {
				t.Errorf("client got %q, upstream error %q", body, obs.upstreamErr)
			}
			if obs.deltasSeenByObserver != strings.Count(tc.upstream, "output_text.delta\n") {
				t.Errorf("the record saw %d deltas", obs.deltasSeenByObserver)
			}
		})
	}
}

// n>1 choices are interleaved and closed by one [DONE]; the charge is the sum of theirs.
func TestMergedPump(t *testing.T) {
	rec := httptest.NewRecorder()
	obs := &record{}
	bodies := []io.Reader{strings.NewReader(created + delta + complete), strings.NewReader(created + delta + delta + complete)}
	convs := make([]*translate.StreamConverter, 2)
	for i := range convs {
		meta := chatMeta()
		meta.ChoiceIndex, meta.OmitTrailer = i, true
		convs[i] = translate.NewStreamConverter(meta)
	}
	ch := newPump(context.Background(), rec, obs).Merged(bodies, []context.CancelFunc{func() {}, func() {}}, convs, chatMeta())
	// Two choices' reported usage added up: two platform calls reported it.
	if ch != accounting.Known(ratelimit.Usage{InputTokens: 4, OutputTokens: 1}).Plus(accounting.Known(ratelimit.Usage{InputTokens: 4, OutputTokens: 3})) {
		t.Fatalf("charge %+v", ch)
	}
	body := rec.Body.String()
	if strings.Count(body, "data: [DONE]") != 1 || !strings.HasSuffix(body, "data: [DONE]\n\n") || !strings.Contains(body, `"index":1`) {
		t.Fatalf("client got %q", body)
	}
}

// A non-stream client served from a stream: the aggregator is fed every event, and a stop
// the aggregator reports is drained for the usage in flight.
func TestAggregate(t *testing.T) {
	obs := &record{}
	a := NewAggregate(strings.NewReader(created+delta+delta+complete), 0, func() {}, obs, nil)
	defer a.Close()
	var seen []string
	a.Read(func(typ string, data []byte) bool {
		seen = append(seen, typ)
		return typ == "response.output_text.delta" // stop at the first delta
	})
	if !a.Finished() || len(seen) != 2 {
		t.Fatalf("finished %t after %v", a.Finished(), seen)
	}
	ch := a.Charge(context.Background(), func() {}, reserve, translate.Usage{InputTokens: 10, OutputTokens: 1})
	if ch != accounting.Known(ratelimit.Usage{InputTokens: 4, OutputTokens: 2}) {
		t.Fatalf("charge %+v: the terminal usage in flight was not read", ch)
	}
	if !bytes.Equal([]byte(seen[0]), []byte("response.created")) {
		t.Fatalf("events %v", seen)
	}
}
