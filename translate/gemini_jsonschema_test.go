package translate

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestAppendJSONSchema(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"lower case copied byte for byte", `{"type": "object", "properties": {"a": {"type": "string"}}}`,
			`{"type": "object", "properties": {"a": {"type": "string"}}}`},
		{"the CLI's router schema", `{"type":"OBJECT","properties":{"complexity_reasoning":{"type":"STRING"},"complexity_score":{"type":"INTEGER"}},"required":["complexity_reasoning","complexity_score"]}`,
			`{"type":"object","properties":{"complexity_reasoning":{"type":"string"},"complexity_score":{"type":"integer"}},"required":["complexity_reasoning","complexity_score"]}`},
		{"type lists and items", `{"type":["STRING","NULL"],"items":{"type":"ARRAY","items":{"type":"NUMBER"}},"anyOf":[{"type":"BOOLEAN"}]}`,
			`{"type":["string","null"],"items":{"type":"array","items":{"type":"number"}},"anyOf":[{"type":"boolean"}]}`},
		{"properties named like keywords", `{"type":"OBJECT","properties":{"type":{"type":"STRING"},"enum":{"type":"OBJECT"},"default":{"type":"INTEGER"}}}`,
			`{"type":"object","properties":{"type":{"type":"string"},"enum":{"type":"object"},"default":{"type":"integer"}}}`},
		{"data left as it is", `{"type":"STRING","enum":["OBJECT","STRING"],"default":"NULL","examples":[{"type":"OBJECT"}],"const":"ARRAY"}`,
			`{"type":"string","enum":["OBJECT","STRING"],"default":"NULL","examples":[{"type":"OBJECT"}],"const":"ARRAY"}`},
		{"other names left", `{"type":"Object","$defs":{"x":{"type":"OBJECT"}},"format":"STRING"}`,
			`{"type":"Object","$defs":{"x":{"type":"object"}},"format":"STRING"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := string(appendJSONSchema(nil, gjson.Parse(c.in)))
			if got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// The rewrite keeps any JSON object valid JSON, and changes nothing in one without an
// upper-case type name.
func FuzzAppendJSONSchema(f *testing.F) {
	f.Add(`{"type":"OBJECT","properties":{"a":{"type":["STRING","NULL"]}}}`)
	f.Add(`{"type":"object","enum":["OBJECT"]}`)
	f.Add(`{"properties":{"type":{"type":"ARRAY","items":{"type":"INTEGER"}}},"examples":[{"type":"OBJECT"}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		if CheckJSON([]byte(in)) != JSONValid || !gjson.Parse(in).IsObject() {
			return
		}
		out := appendJSONSchema(nil, gjson.Parse(in))
		if !ValidJSON(out) {
			t.Fatalf("%s became invalid JSON: %s", in, out)
		}
		if string(out) != in && string(appendJSONSchema(nil, gjson.ParseBytes(out))) != string(out) {
			t.Fatalf("not stable: %s -> %s", in, out)
		}
	})
}
