package reqlog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// slogLine is the line slog's own text handler writes for r.
func slogLine(t testing.TB, at time.Time, level slog.Level, msg string, r *RequestSummary, extra slog.Attr) string {
	t.Helper()
	var out bytes.Buffer
	rec := slog.NewRecord(at, level, msg, 0)
	rec.AddAttrs(r.attrs(nil, extra)...)
	if err := slog.NewTextHandler(&out, nil).Handle(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func sampleSummary() RequestSummary {
	return RequestSummary{RequestID: "req_4581080cbd8554a20ddb3c9f63477dbb", Method: "POST", Route: "/v1/responses",
		Team: "bench", Key: "bench-1", Model: "bench-fast", Status: 200, Stream: true,
		Duration: 4934746 * time.Nanosecond, TTFB: 12500 * time.Nanosecond, InputTokens: 18, OutputTokens: 4096,
		InputReserved: 18, Attempts: 1}
}

// TestTextLineIsSlogs: the fast path writes, byte for byte, the line slog's text handler
// writes for the same request, whatever its values hold (quoting, optional fields, extra).
func TestTextLineIsSlogs(t *testing.T) {
	at := time.Date(2026, 12, 6, 9, 56, 54, 274_999_999, time.UTC)
	cases := []struct {
		name  string
		edit  func(*RequestSummary)
		level slog.Level
		extra slog.Attr
	}{
		{"plain", func(*RequestSummary) {}, slog.LevelInfo, slog.Attr{}},
		{"all_set", func(r *RequestSummary) {
			r.ServedModel, r.ErrorCode, r.Refusal, r.UpstreamErr, r.UsageEstimated = "medium", "rate_limited", "tokens_per_day", "canceled", "no_answer"
			r.TraceID, r.UpstreamModel, r.EndUser, r.Tags, r.ClientRequestID = "0af7651916cd43dd8448eb211c80319c", "sim-chat", "user 7", "feature:a=b,env:prod", "abc\x00\"quoted\""
			r.Transport, r.Outcome = "websocket", "crashed"
		}, slog.LevelWarn, slog.Int("turns", 7)},
		{"odd_text", func(r *RequestSummary) {
			r.Model = "modèle\u00a0x\\y\x7f" // non-breaking space: quoted; backslash and DEL: not
			r.Team, r.Key = "", "k=v"
			r.EndUser = "\xff\xfe"
			r.Tags = "emoji:🙂"
		}, slog.LevelInfo, slog.String("response_status", "completed")},
		{"negative_and_zero", func(r *RequestSummary) {
			r.Status, r.Duration, r.TTFB, r.InputTokens = 0, 0, -3*time.Second, -1
		}, slog.LevelError, slog.String("response_status", "")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := sampleSummary()
			c.edit(&r)
			want := slogLine(t, at, c.level, "request", &r, c.extra)
			if got := string(appendTextLine(nil, at, c.level, "request", &r, c.extra)); got != want {
				t.Errorf("fast path:\n%q\nslog:\n%q", got, want)
			}
		})
	}
}

func FuzzTextLineIsSlogs(f *testing.F) {
	f.Add("bench-fast", "user 1", "a:b", "req_1", int64(18), int64(3))
	f.Add("", "\"", "=", "\x00\t\n", int64(-1), int64(0))
	f.Add("é\u2028", "\xff", "\\", "x y", int64(1<<40), int64(-7))
	f.Fuzz(func(t *testing.T, model, endUser, tags, rid string, tokens, turns int64) {
		r := sampleSummary()
		r.Model, r.EndUser, r.Tags, r.ClientRequestID, r.InputTokens = model, endUser, tags, rid, tokens
		at := time.Unix(1_780_000_000, tokens&0x3fffffff).UTC()
		extra := slog.Int64("turns", turns)
		want := slogLine(t, at, slog.LevelInfo, "request", &r, extra)
		if got := string(appendTextLine(nil, at, slog.LevelInfo, "request", &r, extra)); got != want {
			t.Fatalf("fast path:\n%q\nslog:\n%q", got, want)
		}
	})
}

// TestTextHandlerLogs: a logger on the TextHandler writes the access line through the fast
// path and other records through slog, each whole, from many goroutines at once, and
// honours the level.
func TestTextHandlerLogs(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r := sampleSummary()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				r := r
				r.Log(log, "request", slog.Attr{}) // info: below the level, not written
				r.Status = 502
				r.Log(log, "request", slog.Int("turns", 2))
				log.Warn("other", slog.String("k", "v"))
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8*50*2 {
		t.Fatalf("%d lines, want %d", len(lines), 8*50*2)
	}
	var access int
	for _, l := range lines {
		switch {
		case strings.Contains(l, " msg=request ") && strings.Contains(l, " status=502 ") && strings.HasSuffix(l, " turns=2") && strings.Contains(l, "level=WARN"):
			access++
		case strings.HasSuffix(l, "level=WARN msg=other k=v"):
		default:
			t.Fatalf("unexpected line %q", l)
		}
	}
	if access != 400 {
		t.Errorf("%d access lines, want 400", access)
	}
}
