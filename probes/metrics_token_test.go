package probes

import "testing"

func TestMetricsAllowed(t *testing.T) {
	cases := []struct {
		token, header string
		want          bool
	}{
		{"", "", true},
		{"", "Bearer anything", true},
		{"s3cret-token", "", false},
		{"s3cret-token", "Bearer s3cret-token", true},
		{"s3cret-token", "Bearer s3cret-toke", false},
		{"s3cret-token", "Bearer s3cret-token2", false},
		{"s3cret-token", "bearer s3cret-token", false},
		{"s3cret-token", "s3cret-token", false},
		{"s3cret-token", "Basic czNjcmV0LXRva2Vu", false},
	}
	for _, tc := range cases {
		if got := metricsAllowed(tc.token, tc.header); got != tc.want {
			t.Errorf("metricsAllowed(%q, %q) = %v, want %v", tc.token, tc.header, got, tc.want)
		}
	}
}
