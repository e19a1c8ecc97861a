package admin

import (
	"strings"
	"testing"
)

func TestRepeatedField(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"team":"a","name":"b"}`, ""},
		{`{"team":"a","team":"b"}`, "team"},
		{`{"team":"a","name":"team","x":"name"}`, ""},
		{`{"limits":{"spend_per_day":1,"spend_per_day":1000}}`, "spend_per_day"},
		{`{"a":{"k":1},"b":{"k":2}}`, ""},
		{`{"a":[{"k":1},{"k":2}],"a2":["k","k"]}`, ""},
		{`{"a":[{"k":1,"k":2}]}`, "k"},
		{`{"t\u0065am":"a","team":"b"}`, "team"},
		{`not json`, ""},
		{strings.Repeat("[", 5000) + strings.Repeat("]", 5000), ""},
	}
	for _, tt := range tests {
		if got := repeatedField([]byte(tt.body)); got != tt.want {
			t.Errorf("%.60s: %q, want %q", tt.body, got, tt.want)
		}
	}
}

func FuzzRepeatedField(f *testing.F) {
	f.Add([]byte(`{"team":"a","limits":{"x":1,"x":2}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if k := repeatedField(body); k != "" && strings.Count(string(body), k) < 2 && !strings.Contains(string(body), `\`) {
			t.Fatalf("%q: %q is not repeated", body, k)
		}
	})
}
