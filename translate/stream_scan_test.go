package translate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// forEachScan is the field scan through gjson's ForEach that eventFields.scan replaced,
// after a check with gjson.Valid; the scan must accept the same events and give exactly
// its results.
func forEachScan(data string) eventFields {
	var f eventFields
	gjson.Parse(data).ForEach(func(k, v gjson.Result) bool {
		if dst := f.field(k.Str, 1); dst != nil && !dst.Exists() {
			*dst = v
		}
		return true
	})
	if f.response.IsObject() {
		f.response.ForEach(func(k, v gjson.Result) bool {
			if dst := f.responseField(k.Str); dst != nil && !dst.Exists() {
				*dst = v
			}
			return true
		})
	}
	return f
}

// checkScan scans data with got, which may hold an earlier event's fields: the converter
// reuses one.
func checkScan(t *testing.T, got *eventFields, data string) {
	t.Helper()
	valid := gjson.Valid(data)
	deep := valid && nesting(data) > MaxEventDepth // gjson has no bound; the scan has
	if deep {
		valid = false
	}
	if got.scan([]byte(data)) != valid {
		t.Fatalf("%q: scan says valid %v, gjson %v", data, !valid, valid)
	}
	if got.tooDeep != deep {
		t.Fatalf("%.80q: scan says too deep %v, want %v", data, got.tooDeep, deep)
	}
	verdict := JSONInvalid
	switch {
	case deep:
		verdict = JSONTooDeep
	case valid:
		verdict = JSONValid
	}
	if got := CheckJSON([]byte(data)); got != verdict {
		t.Fatalf("%.80q: CheckJSON %v, want %v", data, got, verdict)
	}
	if !valid {
		return
	}
	want := forEachScan(data)
	g, w := got.all(), want.all()
	for i := range g {
		if g[i].Type != w[i].Type || g[i].Raw != w[i].Raw || g[i].Str != w[i].Str || g[i].Num != w[i].Num || g[i].Index != w[i].Index {
			t.Fatalf("%q: field %d: scan %+v, ForEach %+v", data, i, g[i], w[i])
		}
	}
}

func (f *eventFields) all() []gjson.Result {
	return []gjson.Result{f.typ, f.outputIndex, f.contentIndex, f.summaryIndex, f.delta, f.text,
		f.refusal, f.arguments, f.input, f.logprobs, f.item, f.response, f.err,
		f.usage, f.output, f.status, f.incomplete}
}

var scanCases = []string{
	`{}`, ` { } `, `[]`, `[{"type":"x"}]`, `"type"`, `12`, `true`, `null`,
	`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"hi ","logprobs":[],"sequence_number":4}`,
	"\t\r\n{\n \"type\" :\t\"a\" ,\r\n\"delta\":\"b\"\n}\n",
	`{"type":"a","type":"b","delta":"x","delta":"y"}`,
	`{"typ\u0065":"escaped key","d\\elta":"not delta","delta":"a\"b\\\\","text":"\\"}`,
	`{"delta":"\u00e9\ud83d\ude00\/\b\f\n\r\t","text":"tail\\\\\\\"q"}`,
	`{"output_index":-1.5e3,"content_index":1E+2,"summary_index":0.0,"type":null}`,
	`{"output_index":"7","content_index":true,"summary_index":false,"refusal":null}`,
	`{"output_index":12345678901234567890,"content_index":-0,"summary_index":9007199254740993}`,
	`{"item":{"type":"message","content":[{"type":"output_text","text":"}]\"{["}]},"response":[1,{"a":[]},"]"],"error":{}}`,
	`{"x":{"type":"nested, not top level","delta":"no"},"y":["type","delta"],"type":"top"}`,
	`{"logprobs":[{"token":"a","logprob":-0.1,"bytes":[97],"top_logprobs":[]}],"arguments":"{\"q\":1}","input":""}`,
	`{"error":{"code":"rate_limit_exceeded","message":"slow down"},"type":"error"}`,
	`{"a":"\\","type":"after a string ending in a backslash"}`,
	`{"a":"\\\"","type":"after an escaped quote"}`,
	// A terminal event's response: its own fields are read, the first occurrence of each and
	// of the response itself, none from deeper down or from another top-level object.
	`{"type":"response.completed","response":{"status":"completed","status":"x","output":[{"usage":{}}],"usage":{"input_tokens":1,"output_tokens_details":{"reasoning_tokens":2}},"incomplete_details":null,"more":{"status":"nested, not read"}}}`,
	`{"response":{"status":"first"},"response":{"status":"second","usage":{}}}`,
	`{"item":{"status":"an item's, not the response's","usage":{}},"response":{"output":[],"st\u0061tus":"escaped key"}}`,
	`{"response":{ "incomplete_details" : {"reason":"max_output_tokens"} , "output" : [ ] }}`,
	`{"response":{"usage":{"input_tokens":1}`, `{"response":{"status":"a",}}`, `{"response":{"status"}}`,
	// Not JSON, each just so.
	``, ` `, `{`, `}`, `{"type":"a"`, `{"type":"a",}`, `{"type" "a"}`, `{"type":"a"}x`, `{"type":"a"}}`,
	`{type:"a"}`, `{'type':'a'}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":01}`, `{"a":-}`, `{"a":1.}`,
	`{"a":.5}`, `{"a":1e}`, `{"a":1e+}`, `{"a":+1}`, `{"a":tru}`, `{"a":nul}`, `{"a":True}`,
	`{"a":"\x"}`, `{"a":"\u12G4"}`, `{"a":"\u12"}`, "{\"a\":\"tab\there\"}", "{\"a\":\"\x00\"}",
	`{"a":"unterminated}`, `{"a":{"b":1}`, `{"a":[1}`, `{"a":1]}`, `[1,2`, `"\`, `-`, `[`,
	`{"a":1,"b"}`, `{"a":1 "b":2}`, `{,"a":1}`, `{"a":NaN}`, `{"a":Infinity}`, "\ufeff{}",
	`{"a":1}{"b":2}`, `{"a":"b"},`, `{"\u00zz":1}`,
	// JSON, each just so.
	`{"a":-0.0e-0}`, `{"a":0E5}`, `{"a":[[[[[]]]]],"b":{"c":{"d":{}}}}`, "{\"a\":\"\x7f\xff\xfe\"}",
	`{"a":"\u0000\uFFFF\uD800"}`, `[true,false,null,-1,"x",{},[]]`, ` "just a string" `, `0`,
}

func TestEventScanMatchesForEach(t *testing.T) {
	var f eventFields
	for _, c := range scanCases {
		checkScan(t, &f, c)
	}
	for _, in := range globCases(t, "testdata/streams/*.sse") {
		raw, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range splitEvents(raw) {
			checkScan(t, &f, ev[1])
		}
	}
	for _, ev := range stream200() {
		checkScan(t, &f, ev[1])
	}
}

func FuzzEventScan(f *testing.F) {
	for _, c := range scanCases {
		f.Add(c)
	}
	if files, err := filepath.Glob("testdata/streams/*.sse"); err == nil {
		for _, in := range files {
			if raw, err := os.ReadFile(in); err == nil {
				for _, ev := range splitEvents(raw) {
					f.Add(ev[1])
				}
			}
		}
	}
	all := `{"type":"t","output_index":1,"content_index":2,"summary_index":3,"delta":"d","text":"x",` +
		`"refusal":"r","arguments":"a","input":"i","logprobs":[],"item":{},"error":{},` +
		`"response":{"usage":{},"output":[],"status":"s","incomplete_details":{}}}`
	f.Fuzz(func(t *testing.T, data string) {
		var f eventFields
		checkScan(t, &f, all) // every field set: none may leak into the next event
		checkScan(t, &f, data)
		// The same event inside whitespace, as an upstream may pad it.
		checkScan(t, &f, " \n"+data+"\t")
		if i := strings.IndexByte(data, ':'); i > 0 {
			checkScan(t, &f, data[:i]+" : "+data[i+1:])
		}
	})
}

func TestHasStringStop(t *testing.T) {
	naive := func(x uint64) bool {
		for range 8 {
			if c := byte(x); c < ' ' || c == '"' || c == '\\' {
				return true
			}
			x >>= 8
		}
		return false
	}
	const plain = 0x6161616161616161 // "aaaaaaaa"
	for pos := range 8 {
		for c := range 256 {
			x := plain&^(0xff<<(8*pos)) | uint64(c)<<(8*pos)
			if hasStringStop(x) != naive(x) {
				t.Fatalf("byte %#x at %d: got %v", c, pos, !naive(x))
			}
		}
	}
	x := uint64(0x9e3779b97f4a7c15)
	for range 1 << 20 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if hasStringStop(x) != naive(x) {
			t.Fatalf("%#x: got %v", x, !naive(x))
		}
	}
}
