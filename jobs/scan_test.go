package jobs

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/ratelimit"
	"modelgate/relay"
	"modelgate/stored"
)

func scanString(stream string) scanned {
	events := relay.NewEventReader(strings.NewReader(stream), relay.MaxEventSize)
	defer events.Release()
	return scan(events, 7)
}

func bgEvent(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

func TestScan(t *testing.T) {
	item := `{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"hi"}]}`
	delta := bgEvent("response.output_text.delta", `{"type":"response.output_text.delta","delta":"hi"}`)
	itemDone := bgEvent("response.output_item.done", `{"type":"response.output_item.done","item":`+item+`}`)
	tests := []struct {
		name, stream string
		done         bool
		status       string
		usage        ratelimit.Usage
		outputItems  int64
		invalid      bool
		errCode      string
	}{
		{"completed", delta + itemDone + bgEvent("response.completed",
			`{"type":"response.completed","response":{"id":"r","status":"completed","output":[`+item+`],"usage":{"input_tokens":3,"output_tokens":1}}}`),
			true, stored.StatusCompleted, ratelimit.Usage{InputTokens: 3, OutputTokens: 1}, 0, false, ""},
		{"incomplete_without_status", bgEvent("response.incomplete", `{"type":"response.incomplete","response":{"id":"r"}}`),
			true, stored.StatusIncomplete, ratelimit.Usage{InputTokens: 7}, 0, false, ""},
		{"platform_says_cancelled_on_completed", bgEvent("response.completed", `{"type":"response.completed","response":{"status":"cancelled"}}`),
			true, stored.StatusCompleted, ratelimit.Usage{InputTokens: 7}, 0, false, ""},
		{"failed", bgEvent("response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"x"}}}`),
			true, stored.StatusFailed, ratelimit.Usage{InputTokens: 7}, 0, false, ""},
		{"error_event", delta + delta + itemDone + bgEvent("error", `{"type":"error","code":"rate_limit_exceeded","message":"slow down"}`),
			true, stored.StatusFailed, ratelimit.Usage{InputTokens: 7, OutputTokens: 2}, 1, false, "rate_limit_exceeded"},
		{"nested_error_event", bgEvent("error", `{"type":"error","error":{"code":"c","message":"m"}}`),
			true, stored.StatusFailed, ratelimit.Usage{InputTokens: 7}, 0, false, "c"},
		{"cut_short", delta + itemDone + delta, false, "", ratelimit.Usage{InputTokens: 7, OutputTokens: 2}, 1, false, ""},
		{"not_json", delta + "data: {nope\n\n", false, "", ratelimit.Usage{InputTokens: 7, OutputTokens: 1}, 0, true, ""},
		{"not_sse", "HTTP/1.1 200 OK\n\n", false, "", ratelimit.Usage{InputTokens: 7}, 0, true, ""},
		{"terminal_without_response", bgEvent("response.completed", `{"type":"response.completed"}`), false, "", ratelimit.Usage{InputTokens: 7}, 0, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := scanString(tc.stream)
			if sc.done != tc.done || sc.status != tc.status || sc.usage != tc.usage || sc.invalid != tc.invalid || sc.rerr.Code != tc.errCode {
				t.Errorf("got done=%v status=%q usage=%+v invalid=%v err=%+v", sc.done, sc.status, sc.usage, sc.invalid, sc.rerr)
			}
			if tc.done && sc.final == nil && sc.rerr.Message == "" {
				t.Error("an error event recorded no message")
			}
			if got := gjson.GetBytes(sc.output, "#").Int(); got != tc.outputItems {
				t.Errorf("output items %d, want %d: %s", got, tc.outputItems, sc.output)
			}
		})
	}
}

// FuzzScan: whatever the platform streams, the scan ends with a status it
// may record and output that is a JSON array (or none).
func FuzzScan(f *testing.F) {
	f.Add(bgEvent("response.output_item.done", `{"item":{"a":1}}`) + bgEvent("response.completed", `{"response":{"status":"completed","usage":{}}}`))
	f.Add(bgEvent("error", `{"code":1,"message":[]}`))
	f.Add("data: {}\r\n\r\ndata: [\n\n")
	f.Fuzz(func(t *testing.T, stream string) {
		sc := scanString(stream)
		if sc.done && !knownFinal(sc.status) {
			t.Fatalf("status %q", sc.status)
		}
		if len(sc.output) > 0 && !gjson.ValidBytes(sc.output) {
			t.Fatalf("output not JSON: %q", sc.output)
		}
		if sc.final == nil && (sc.usage.InputTokens != 7 || sc.usage.OutputTokens < 0) {
			t.Fatalf("usage %+v", sc.usage)
		}
	})
}
