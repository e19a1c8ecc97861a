package translate

import "testing"

func TestSnakeCase(t *testing.T) {
	tests := []struct{ in, want string }{
		{"base_url", "base_url"},
		{"baseURL", "base_url"},
		{"apiKey", "api_key"},
		{"extraHeaders", "extra_headers"},
		{"azureADToken", "azure_ad_token"},
		{"URLBase", "url_base"},
		{"seed", "seed"},
		{"topK", "top_k"},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.want+"_from_"+tt.in, func(t *testing.T) {
			if got := snakeCase(tt.in); got != tt.want {
				t.Errorf("snakeCase(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNeverForwardedSpellings(t *testing.T) {
	for _, key := range []string{"api_base", "baseURL", "apiKey", "extraHeaders", "defaultHeaders", "azureADToken", "webhookUrl"} {
		if !neverForwarded(key) {
			t.Errorf("%q would be forwarded upstream", key)
		}
	}
	for _, key := range []string{"seed", "top_k", "topK", "vendor_opts"} {
		if neverForwarded(key) {
			t.Errorf("%q would be dropped", key)
		}
	}
}
