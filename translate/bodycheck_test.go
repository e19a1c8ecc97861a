package translate

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// What CheckClientBody finds in bodies that gjson alone accepts.
func TestCheckClientBody(t *testing.T) {
	tests := []struct {
		name, body string
		check      JSONCheck
		key        string
	}{
		{"plain", `{"model":"m","Seed":1,"x-Custom":2}`, JSONValid, ""},
		{"exact_escaped", `{"\u006dodel":"m"}`, JSONValid, ""},
		{"upper_model", `{"model":"allowed","Model":"forbidden"}`, JSONFieldCase, "Model"},
		{"all_caps", `{"STREAM":true}`, JSONFieldCase, "STREAM"},
		{"snake_caps", `{"MAX_OUTPUT_TOKENS":5}`, JSONFieldCase, "MAX_OUTPUT_TOKENS"},
		{"mixed", `{"Previous_Response_Id":"resp_1"}`, JSONFieldCase, "Previous_Response_Id"},
		{"background", ` {"Background":true} `, JSONFieldCase, "Background"},
		{"escaped_upper", `{"\u004dodel":"m"}`, JSONFieldCase, "Model"},
		{"long_s", `{"ſtream":true}`, JSONFieldCase, "ſtream"},
		{"long_s_escaped", `{"\u017ftream":true}`, JSONFieldCase, "ſtream"},
		{"kelvin", `{"top_\u212a":5}`, JSONFieldCase, "top_\u212a"},
		{"dotless_i", `{"ınput":"x"}`, JSONFieldCase, "ınput"},
		{"first_of_two", `{"Tools":[],"Input":"x"}`, JSONFieldCase, "Tools"},
		{"unknown_upper", `{"Frobnicate":1,"API_KEY":"k"}`, JSONValid, ""},
		{"other_letters", `{"mödel":1,"модель":2}`, JSONValid, ""},
		{"nested_not_judged", `{"metadata":{"Model":"x","User":"y"},"input":[{"Role":"user"}]}`, JSONValid, ""},
		{"bad_utf8_value", "{\"input\":\"a\xffb\"}", JSONNotUTF8, ""},
		{"bad_utf8_key", "{\"in\xc3\":1}", JSONNotUTF8, ""},
		{"bad_utf8_nested", "{\"a\":[{\"b\":\"\xed\xa0\x80\"}]}", JSONNotUTF8, ""}, // an encoded surrogate
		{"bad_utf8_before_case", "{\"Model\":\"\xff\"}", JSONNotUTF8, ""},
		{"escaped_lone_surrogate", `{"input":"\ud800"}`, JSONValid, ""}, // valid UTF-8 text; decoders replace it
		{"not_json", `{"Model":}`, JSONInvalid, ""},
		{"trailing", `{"a":1} x`, JSONInvalid, ""},
		{"too_deep", strings.Repeat("[", MaxEventDepth+1), JSONTooDeep, ""},
		{"too_deep_in_object", `{"Model":` + strings.Repeat("[", MaxEventDepth) + strings.Repeat("]", MaxEventDepth) + `}`, JSONTooDeep, ""},
		{"array", `[{"Model":1}]`, JSONValid, ""},
		{"empty_object", `{ }`, JSONValid, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check, key := CheckClientBody([]byte(tt.body))
			if check != tt.check || key != tt.key {
				t.Fatalf("CheckClientBody = %v %q, want %v %q", check, key, tt.check, tt.key)
			}
			err := ClientBodyError(check, key)
			switch {
			case check == JSONValid:
				if err != nil {
					t.Fatalf("error %v for a valid body", err)
				}
			case err == nil || err.Status != 400:
				t.Fatalf("error %v, want a 400", err)
			case check == JSONFieldCase && (err.Code != CodeFieldCase || err.Param != key || !strings.Contains(err.Message, `"`+key+`"`)):
				t.Fatalf("error %+v does not name %q", err, key)
			case check == JSONNotUTF8 && (err.Code != "invalid_json" || !strings.Contains(err.Message, "UTF-8")):
				t.Fatalf("error %+v", err)
			}
		})
	}
}

// The premise: Go's encoding/json, as a platform may decode, reads every case variant above
// as the field, including the non-ASCII folds, and keeps the last one.
func TestEncodingJSONReadsCaseVariants(t *testing.T) {
	var v struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
		TopK   int    `json:"top_k"`
	}
	body := `{"model":"allowed","Model":"forbidden","ſtream":true,"top_` + "\u212a" + `":7}`
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.Model != "forbidden" || !v.Stream || v.TopK != 7 {
		t.Fatalf("encoding/json read %+v", v)
	}
	if check, key := CheckClientBody([]byte(body)); check != JSONFieldCase || key != "Model" {
		t.Fatalf("CheckClientBody = %v %q", check, key)
	}
}

// Every known field is spelled as caseVariant assumes: lower-case ASCII, short enough.
func TestKnownFieldsSpelling(t *testing.T) {
	for _, body := range []string{chatAll, messagesAll, responsesAll} {
		gjson.Parse(body).ForEach(func(k, _ gjson.Result) bool {
			name := k.Str
			if !KnownField(name) {
				t.Errorf("%q is read by a dialect but not a KnownField", name)
			}
			if len(name) > maxKnownKey || strings.ToLower(name) != name || !isASCII(name) {
				t.Errorf("%q: not lower-case ASCII of at most %d bytes", name, maxKnownKey)
			}
			return true
		})
	}
}

// Bodies naming every field each dialect reads (values do not matter here).
const (
	chatAll = `{"model":1,"messages":1,"stream":1,"stream_options":1,"n":1,"stop":1,"max_completion_tokens":1,"max_tokens":1,
"temperature":1,"top_p":1,"logprobs":1,"top_logprobs":1,"response_format":1,"verbosity":1,"reasoning_effort":1,"tools":1,
"tool_choice":1,"parallel_tool_calls":1,"functions":1,"function_call":1,"store":1,"metadata":1,"web_search_options":1,
"modalities":1,"audio":1,"prediction":1,"user":1,"safety_identifier":1,"prompt_cache_key":1,"prompt_cache_retention":1,
"service_tier":1,"prompt_cache_options":1,"moderation":1,"input":1,"instructions":1,"text":1,"reasoning":1,"include":1,
"max_output_tokens":1,"previous_response_id":1,"conversation":1,"background":1,"prompt":1}`
	messagesAll = `{"model":1,"messages":1,"system":1,"max_tokens":1,"stream":1,"stop_sequences":1,"temperature":1,"top_p":1,
"top_k":1,"tools":1,"tool_choice":1,"thinking":1,"metadata":1,"output_config":1,"output_format":1,"mcp_servers":1,"container":1}`
	responsesAll = `{"model":1,"input":1,"stream":1,"max_output_tokens":1,"tools":1,"tool_choice":1,"previous_response_id":1,
"prompt":1,"conversation":1,"store":1,"background":1,"user":1,"safety_identifier":1,"prompt_cache_key":1,"metadata":1,
"instructions":1,"text":1,"reasoning":1,"include":1,"parallel_tool_calls":1,"max_tool_calls":1,"temperature":1,"top_p":1,
"top_logprobs":1,"truncation":1,"service_tier":1,"stream_options":1,"prompt_cache_retention":1,"type":1,"generate":1,"stream_id":1}`
)

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Upper-casing any one letter of any field a dialect reads is refused by the parsers, with
// the key named; so is the all-caps spelling.
func TestParsersRefuseCaseVariants(t *testing.T) {
	for _, body := range []string{chatAll, messagesAll, responsesAll} {
		gjson.Parse(body).ForEach(func(k, _ gjson.Result) bool {
			for _, variant := range []string{strings.ToUpper(k.Str), strings.ToUpper(k.Str[:1]) + k.Str[1:]} {
				b := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"` + variant + `":1}`)
				_, e1 := ParseChat(b)
				_, e2 := ParseMessages(b)
				_, e3 := ParseMessagesCount(b)
				for _, err := range []error{e1, e2, e3} {
					e, ok := err.(*Error)
					if !ok || e.Status != 400 || e.Code != CodeFieldCase || e.Param != variant {
						t.Errorf("%s: %v", variant, err)
					}
				}
			}
			return true
		})
	}
	if _, err := ParseChat([]byte("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"h\xffi\"}]}")); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("invalid UTF-8 in a message: %v", err)
	}
}

// FuzzCheckClientBody holds CheckClientBody to CheckJSON's verdict on what is JSON, to
// utf8.Valid on the encoding, and to an independent fold on the keys: the one it names is
// the first top-level key that is not known but matches a known field under Unicode simple
// folding or encoding/json's fold, and a valid body has none.
func FuzzCheckClientBody(f *testing.F) {
	for _, s := range []string{`{"model":"a","Model":"b"}`, `{"\u017ftream":true}`, `{"top_` + "\u212a" + `":1}`,
		`{"\u004d\u004fDEL":1}`, "{\"a\":\"\xff\"}", `{"metadata":{"Model":1}}`, `[{"Model":1}]`, `{"İnput":1}`,
		chatAll, messagesAll, responsesAll, `{"model":"m"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check, key := CheckClientBody(body)
		base := CheckJSON(body)
		switch {
		case base != JSONValid:
			if check != base {
				t.Fatalf("CheckJSON %v, CheckClientBody %v", base, check)
			}
			return
		case !utf8.Valid(body):
			if check != JSONNotUTF8 {
				t.Fatalf("invalid UTF-8 judged %v", check)
			}
			return
		}
		want := ""
		if root := gjson.ParseBytes(body); root.IsObject() {
			root.ForEach(func(k, _ gjson.Result) bool {
				if !KnownField(k.Str) && KnownField(oracleFold(k.Str)) {
					want = k.Str
					return false
				}
				return true
			})
		}
		if want == "" && (check != JSONValid || key != "") || want != "" && (check != JSONFieldCase || key != want) {
			t.Fatalf("%q: CheckClientBody %v %q, want the key %q", body, check, key, want)
		}
	})
}

// oracleFold spells key in lower-case ASCII where each of its runes matches an ASCII
// letter under strings.EqualFold or encoding/json's fold (upper of lower); a rune that
// matches none is kept, so the result is no known field.
func oracleFold(key string) string {
	var b strings.Builder
	for _, r := range key {
		out := r
		for c := 'a'; c <= 'z'; c++ {
			if strings.EqualFold(string(r), string(c)) || unicode.ToUpper(unicode.ToLower(r)) == unicode.ToUpper(c) ||
				unicode.ToLower(unicode.ToUpper(r)) == c {
				out = c
				break
			}
		}
		b.WriteRune(out)
	}
	return b.String()
}

// The client check against the plain validator on a typical body: what a request pays for
// the case and UTF-8 checks (go test -bench 'Check(ClientBody|JSON)Typical' ./translate).
func BenchmarkCheckClientBodyTypical(b *testing.B) {
	b.SetBytes(int64(len(typicalChat)))
	for b.Loop() {
		if check, _ := CheckClientBody(typicalChat); check != JSONValid {
			b.Fatal(check)
		}
	}
}

func BenchmarkCheckJSONTypical(b *testing.B) {
	b.SetBytes(int64(len(typicalChat)))
	for b.Loop() {
		if CheckJSON(typicalChat) != JSONValid {
			b.Fatal("invalid")
		}
	}
}
