package config

import (
	"strings"
	"testing"
)

func TestParseByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ByteSize
		ok   bool
	}{
		{"268435456", 256 << 20, true},
		{"256MiB", 256 << 20, true},
		{"256 MiB", 256 << 20, true},
		{"512KiB", 512 << 10, true},
		{"1GiB", 1 << 30, true},
		{"2TiB", 2 << 40, true},
		{"100B", 100, true},
		{"0", 0, true},
		{"-1", -1, true}, // left to validation, which names the key
		{"-1MiB", 0, false},
		{"256MB", 0, false},
		{"256mib", 0, false},
		{"1.5MiB", 0, false},
		{"MiB", 0, false},
		{"", 0, false},
		{"+5", 0, false},
		{"8388608TiB", 0, false}, // 2^63: past int64
		{"8388607TiB", 8388607 << 40, true},
		{"9223372036854775808", 0, false},
	} {
		got, ok := parseByteSize(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseByteSize(%q) = %d, %t; want %d, %t", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestInflightBodyBytesKey(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int64
	}{
		{"", 256 << 20},
		{"server: {max_inflight_body_bytes: 64MiB}\n", 64 << 20},
		{"server: {max_inflight_body_bytes: 1048576}\n", 1 << 20},
	} {
		cfg, err := Parse([]byte(tc.yaml), "t.yaml", nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := int64(cfg.Server.MaxInflightBodyBytes); got != tc.want {
			t.Errorf("%q: max_inflight_body_bytes = %d, want %d", tc.yaml, got, tc.want)
		}
	}
	for _, bad := range []string{"server: {max_inflight_body_bytes: 256MB}\n", "server: {max_inflight_body_bytes: -5}\n"} {
		_, err := Parse([]byte(bad), "t.yaml", nil)
		if err == nil || !strings.Contains(err.Error(), "server.max_inflight_body_bytes") {
			t.Errorf("%q: err = %v, want one naming server.max_inflight_body_bytes", bad, err)
		}
	}
}

// FuzzParseByteSize: no input panics, and what is accepted reads back the same through
// strconv once its unit is applied.
func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"256MiB", "1 GiB", "12", "-3", "99999999999TiB", "B", " 7KiB "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := parseByteSize(s)
		if !ok {
			return
		}
		if n < 0 && strings.ContainsAny(s, "KMGT") {
			t.Fatalf("%q read as negative %d", s, n)
		}
	})
}
