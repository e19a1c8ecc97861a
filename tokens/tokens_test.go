package tokens

import "testing"

func TestEstimate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
	}{
		{"empty", "", 0},
		{"one_byte", "a", 1},
		{"four_bytes", "abcd", 1},
		{"five_bytes", "abcde", 2},
		{"multibyte_counts_bytes", "héllo", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EstimateString(tt.in); got != tt.want {
				t.Errorf("EstimateString(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestEstimateResponsesInput(t *testing.T) {
	tests := []struct {
		name string
		body string
		want int64
	}{
		{"string_input", `{"model":"m","input":"hello world"}`, 4},               // `"hello world"` is 13 bytes
		{"with_instructions", `{"instructions":"be brief","input":"hi"}`, 3 + 1}, // 10 bytes + 4 bytes
		{"array_input", `{"input":[{"role":"user","content":"x"}]}`, 8},          // 30 bytes
		{"no_input", `{"model":"m"}`, 0},
		{"not_json", `nonsense`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EstimateResponsesInput([]byte(tt.body)); got != tt.want {
				t.Errorf("EstimateResponsesInput(%s) = %d, want %d", tt.body, got, tt.want)
			}
		})
	}
}
