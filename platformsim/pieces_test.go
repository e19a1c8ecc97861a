package platformsim

import "testing"

func TestPieces(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"", 0},
		{"hello", 1},             // a word of up to five letters
		{"hello world", 2},       // the space leads the second word
		{"extraordinary", 3},     // 13 letters: 1 + 12/5
		{"12345", 2},             // digits in threes
		{`{"a":"b"}`, 2 + 1 + 2}, // {" a ":" b "}: punctuation in threes
		{"a\n\n  b", 3},          // a run of white space is one token
		{"日本", 2},                // other characters one each
		{"Hi, you.", 4},
	}
	for _, tt := range tests {
		if got := pieces(tt.in); got != tt.want {
			t.Errorf("pieces(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestPieceCounter(t *testing.T) {
	body := []byte(`{"model":"m","instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"hello world"},{"type":"input_image","image_url":"x","detail":"low"}]},{"type":"function_call","name":"look","arguments":"{}"},{"type":"function_call_output","output":"ok"}],"tools":[{"type":"function","name":"look","parameters":{}}]}`)
	// request 3; instructions "Be brief." 3; three items at 3 each; "hello world" 2; image 85;
	// call "look" 1 + "{}" 1; output "ok" 1; tool 7 + "look" 1 + "{}" 1
	const want = 3 + 3 + 9 + 2 + 85 + 2 + 1 + 9 // 114
	pc := PieceCounter{Density: map[string]float64{"dense": 1.5}}
	if got := pc.Count("m", body); got != want {
		t.Errorf("Count = %d, want %d", got, want)
	}
	if got := pc.Count("dense", body); got != 171 { // 114 x 1.5
		t.Errorf("dense Count = %d, want 171", got)
	}
	if got := pc.Count("m", []byte(`[1]`)); got != 0 {
		t.Errorf("not an object: %d", got)
	}
}
