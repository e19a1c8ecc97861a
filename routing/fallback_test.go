package routing

import "testing"

func TestClassify(t *testing.T) {
	cases := []struct {
		name string
		f    Failed
		want Trigger
	}{
		{"pool_exhausted_429", Failed{Status: 429, Kind: "status_4xx", Code: "rate_limit_exceeded"}, Next},
		{"platform_500", Failed{Status: 500, Kind: "status_5xx"}, Next},
		{"platform_503", Failed{Status: 503, Kind: "status_5xx"}, Next},
		{"first_byte_timeout", Failed{Status: 504, Kind: "timeout"}, Next},
		{"connect_failed", Failed{Status: 502, Kind: "dial"}, Next},
		{"stall", Failed{Status: 504, Kind: "first_token_timeout"}, Next},
		{"context_window", Failed{Status: 400, Kind: "status_4xx", Code: ContextLengthCode}, Larger},
		{"client_error", Failed{Status: 400, Kind: "status_4xx", Code: "invalid_value"}, Stay},
		{"not_found", Failed{Status: 404, Kind: "status_4xx", Code: "model_not_found"}, Stay},
		{"credential_refused", Failed{Status: 502, Kind: "upstream_auth"}, Stay},
		{"client_gone", Failed{Kind: "canceled", ClientGone: true}, Stay},
	}
	for _, c := range cases {
		if got := Classify(c.f); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPick(t *testing.T) {
	ok := func(window int64) Candidate { return Candidate{ContextWindow: window, Allowed: true, Healthy: true} }
	cases := []struct {
		name   string
		cands  []Candidate
		from   int
		t      Trigger
		window int64
		want   int
	}{
		{"first", []Candidate{ok(0), ok(0)}, 0, Next, 0, 0},
		{"from", []Candidate{ok(0), ok(0)}, 1, Next, 0, 1},
		{"exhausted", []Candidate{ok(0)}, 1, Next, 0, -1},
		{"stay", []Candidate{ok(0)}, 0, Stay, 0, -1},
		{"disallowed_skipped", []Candidate{{Healthy: true}, ok(0)}, 0, Next, 0, 1},
		{"open_breaker_skipped", []Candidate{{Allowed: true}, ok(0)}, 0, Next, 0, 1},
		{"larger_skips_smaller", []Candidate{ok(8000), ok(128000)}, 0, Larger, 32000, 1},
		{"larger_skips_equal", []Candidate{ok(32000)}, 0, Larger, 32000, -1},
		{"larger_skips_unknown", []Candidate{ok(0), ok(64000)}, 0, Larger, 32000, 1},
		{"larger_than_unknown_window", []Candidate{ok(64000)}, 0, Larger, 0, 0},
		{"negative_from", []Candidate{ok(0)}, -3, Next, 0, 0},
	}
	for _, c := range cases {
		if got := Pick(c.cands, c.from, c.t, c.window); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
