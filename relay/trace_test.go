package relay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"modelgate/tracing"
)

// What a span learns of the answer is read from the platform's bytes: a response id, model
// and finish reason are bounded and printable, and only a terminal event names one.
func TestTraceAnswerAndEvent(t *testing.T) {
	long := strings.Repeat("r", 400) + "\x07"
	for _, tc := range []struct {
		name, typ, data          string
		event                    bool // fed as a stream event, not as an answer
		wantID, wantModel, wantF string
	}{
		{name: "answer", data: `{"id":"resp_1","model":"m","status":"completed","output":[]}`, wantID: "resp_1", wantModel: "m", wantF: "stop"},
		{name: "long id and model cut", data: `{"id":"` + long + `","model":"` + long + `","status":"completed"}`,
			wantID: strings.Repeat("r", MaxTracedID), wantModel: strings.Repeat("r", maxTracedModel), wantF: "stop"},
		{name: "terminal event", typ: "response.completed", event: true,
			data: `{"type":"response.completed","response":{"id":"resp_2","model":"m2","status":"completed"}}`, wantID: "resp_2", wantModel: "m2", wantF: "stop"},
		{name: "delta event names nothing", typ: "response.output_text.delta", event: true, data: `{"type":"response.output_text.delta","delta":"x"}`},
		{name: "terminal event without object", typ: "response.completed", event: true, data: `{"response":[1]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tr, err := tracing.NewWithExporter(context.Background(), exp, tracing.Options{Getenv: func(string) string { return "" }})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Shutdown(context.Background())
			q := tr.StartRequest(context.Background(), httptest.NewRequest(http.MethodPost, "/v1/responses", nil), "/v1/responses")
			q.Call("m", 0, nil)
			if tc.event {
				TraceEvent(q, tc.typ, []byte(tc.data))
			} else {
				TraceAnswer(q, tc.data)
			}
			q.End(tracing.Outcome{})
			if err := tr.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, span := range exp.GetSpans() {
				for _, kv := range span.Attributes {
					switch string(kv.Key) {
					case tracing.AttrResponseID, tracing.AttrResponseModel:
						got[string(kv.Key)] = kv.Value.AsString()
					case tracing.AttrFinishReasons:
						got[string(kv.Key)] = strings.Join(kv.Value.AsStringSlice(), ",")
					}
				}
			}
			for k, want := range map[string]string{tracing.AttrResponseID: tc.wantID, tracing.AttrResponseModel: tc.wantModel, tracing.AttrFinishReasons: tc.wantF} {
				if got[k] != want {
					t.Errorf("%s = %q, want %q", k, got[k], want)
				}
			}
		})
	}
}
