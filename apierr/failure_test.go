package apierr

import (
	"net/http"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/upstream"
)

// A failed platform call is answered as upstream states it on the OpenAI routes, mapped to
// Anthropic's shape on the Messages routes, and not at all to a client that left; the
// record notes the failure's kind and code either way.
func TestWriteFailure(t *testing.T) {
	body := []byte(`{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`)
	for _, tc := range []struct {
		name      string
		shape     Shape
		gone      bool
		status    int
		wantType  string // error.type of the answer; "" when nothing is written
		wantCode  string
		wantRetry string
	}{
		{"openai", OpenAI, false, 429, "requests", "rate_limit_exceeded", "3"},
		{"anthropic", Anthropic, false, 429, "rate_limit_error", "rate_limit_exceeded", "3"},
		{"client_gone", OpenAI, true, 200, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, w, r := postContext()
			Mark(c, tc.shape)
			WriteFailure(c, &upstream.Failure{Status: 429, Kind: "status_4xx", Body: body, Header: http.Header{"Retry-After": {"3"}}, ClientGone: tc.gone})
			if !c.IsAborted() || w.Code != tc.status || gjson.Get(w.Body.String(), "error.type").Str != tc.wantType || w.Header().Get("Retry-After") != tc.wantRetry {
				t.Fatalf("aborted %v, %d %v %s", c.IsAborted(), w.Code, w.Header(), w.Body)
			}
			if r.rec.UpstreamErr != "status_4xx" || r.rec.ErrCode != tc.wantCode || r.rec.ClientClosed != tc.gone {
				t.Errorf("record %+v", r.rec)
			}
		})
	}
}
