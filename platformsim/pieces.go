package platformsim

import (
	"math"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// PieceCounter is a platform tokenizer of the simulator's own, unlike modelgate's estimate
// (package tokens), for tests of what modelgate learns from reported usage. It reads what a
// model would see of a request (the text of instructions, messages, tool definitions, calls
// and outputs; images and files at a fixed cost) and splits the text into pieces the way a
// byte-pair tokenizer's pre-split does: a word of up to six letters is one token and a
// longer one one more per six letters; a number one token per three digits; a run of
// punctuation one token per three characters; a run of line breaks and spaces one token
// (a single space before anything else is part of it); any other character one token. Each message
// or item adds 3 tokens, each tool 7, and each request 3.
//
// Density scales a model's count: a model whose tokenizer has a smaller vocabulary counts
// more tokens for the same text (1.3 counts 30% more). A model not named counts at 1.
type PieceCounter struct {
	Density map[string]float64
}

// Count is the input tokens the simulated platform bills for body under model.
func (pc PieceCounter) Count(model string, body []byte) int64 {
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return 0
	}
	n := 3 + pieces(root.Get("instructions").String())
	in := root.Get("input")
	if in.Type == gjson.String {
		n += 3 + pieces(in.Str)
	}
	for _, it := range in.Array() {
		n += 3 + itemPieces(it)
	}
	for _, t := range root.Get("tools").Array() {
		if f := t.Get("function"); f.Exists() {
			t = f
		}
		n += 7 + pieces(t.Get("name").Str) + pieces(t.Get("description").Str) + pieces(t.Get("parameters").Raw)
	}
	n += pieces(root.Get("text.format.schema").Raw)
	d, ok := pc.Density[model]
	if !ok || d <= 0 {
		d = 1
	}
	return int64(math.Round(float64(n) * d))
}

func itemPieces(it gjson.Result) int64 {
	switch it.Get("type").Str {
	case "function_call":
		return pieces(it.Get("name").Str) + pieces(it.Get("arguments").Str)
	case "function_call_output":
		return contentPieces(it.Get("output"))
	}
	return contentPieces(it.Get("content"))
}

func contentPieces(c gjson.Result) int64 {
	if c.Type == gjson.String {
		return pieces(c.Str)
	}
	var n int64
	for _, p := range c.Array() {
		switch p.Get("type").Str {
		case "input_image":
			n += 765
			if p.Get("detail").Str == "low" {
				n += 85 - 765
			}
		case "input_file":
			n += 1500
		case "refusal":
			n += pieces(p.Get("refusal").Str)
		default:
			n += pieces(p.Get("text").Str)
		}
	}
	return n
}

// pieces counts the tokens of s by the rules in PieceCounter's comment.
func pieces(s string) int64 {
	var n int64
	for i := 0; i < len(s); {
		c := s[i]
		j := i + 1
		switch {
		case isLetter(c):
			for j < len(s) && isLetter(s[j]) {
				j++
			}
			n += 1 + int64(j-i-1)/5
		case c >= '0' && c <= '9':
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			n += int64(j-i+2) / 3
		case c == ' ' && j < len(s) && s[j] != ' ' && s[j] != '\n':
			// a space that leads a word or a symbol belongs to it
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			for j < len(s) && (s[j] == ' ' || s[j] == '\n' || s[j] == '\t' || s[j] == '\r') {
				j++
			}
			n++
		case c < utf8.RuneSelf:
			for j < len(s) && s[j] < utf8.RuneSelf && isPunct(s[j]) {
				j++
			}
			n += int64(j-i+2) / 3
		default:
			_, size := utf8.DecodeRuneInString(s[i:])
			j = i + size
			n++
		}
		i = j
	}
	return n
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isPunct(c byte) bool {
	return c > ' ' && c < utf8.RuneSelf && !isLetter(c) && !(c >= '0' && c <= '9')
}
