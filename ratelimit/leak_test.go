package ratelimit

import (
	"testing"

	"go.uber.org/goleak"
)

// TestCloseStopsGoroutines: Close ends the flusher and the lease renewer.
func TestCloseStopsGoroutines(t *testing.T) {
	cases := []struct {
		name string
		opts func(t *testing.T) Options
	}{
		{"memory", func(*testing.T) Options { return Options{} }},
		{"memory_data_path", func(t *testing.T) Options { return Options{DataPath: t.TempDir()} }},
		{"redis", func(t *testing.T) Options { return Options{Store: redisURL(t)} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts(t)
			ignore := goleak.IgnoreCurrent()
			l, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}
